"""A suite run as JUnit XML, so any CI shows its cases: one testsuite, one testcase per case.

A failing case has a `failure` whose message names its first failed expectation and whose
text lists them all; a case not evaluated when the command gave up waiting is an `error`
("did not end"). `time` is the case run's duration in seconds.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from workflows.store.suites import SuiteCaseRun
from workflows.suites.reports import Report, failure_message


def junit_xml(found: Report) -> bytes:
    suite_run = found.suite_run
    errors = sum(1 for c in found.cases if c.passed is None)
    root = ET.Element("testsuites")
    suite = ET.SubElement(
        root,
        "testsuite",
        name=f"{suite_run.suite.workflow.slug}.{suite_run.suite.name}",
        tests=str(len(found.cases)),
        failures=str(len(found.failing)),
        errors=str(errors),
        time=f"{total_seconds(found):.3f}",
    )
    for case in found.cases:
        suite.append(testcase(case, suite_run.suite.name))
    ET.indent(root)
    written: bytes = ET.tostring(root, encoding="utf-8", xml_declaration=True)
    return written


def testcase(case: SuiteCaseRun, classname: str) -> ET.Element:
    element = ET.Element("testcase", name=case.case_name, classname=classname, time=f"{seconds(case):.3f}")
    if case.passed is None:
        ET.SubElement(element, "error", message=f"run {case.run_id} did not end ({case.run.status})")
    elif not case.passed:
        text = failure_message(case)
        failure = ET.SubElement(element, "failure", message=text.splitlines()[0] if text else "failed")
        failure.text = f"{text}\nrun {case.run_id}" + (
            f", origin run {case.origin_id}" if case.origin_id else ""
        )
    return element


def seconds(case: SuiteCaseRun) -> float:
    run = case.run
    if run.finished_at is None:
        return 0.0
    return (run.finished_at - run.created_at).total_seconds()


def total_seconds(found: Report) -> float:
    ends = [c.run.finished_at for c in found.cases if c.run.finished_at is not None]
    return (max(ends) - found.suite_run.created_at).total_seconds() if ends else 0.0
