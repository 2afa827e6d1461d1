"""The egress classifier (workflows/core/egress.py): table-driven over the forms written to slip past a filter."""

from __future__ import annotations

import ipaddress

import pytest
from django.core.exceptions import ImproperlyConfigured

from controlplane import settings as settings_module
from workflows.core import egress
from workflows.core.definition import Limits, validate_definition
from workflows.core.egress import DEFAULT_POLICY, literal_refusal, parse_allow

REFUSED_URLS = [
    ("http://127.0.0.1/", "127.0.0.1", "loopback"),
    ("http://2130706433/", "127.0.0.1", "loopback"),  # decimal
    ("http://0177.0.0.1/", "127.0.0.1", "loopback"),  # octal
    ("http://0x7f000001/", "127.0.0.1", "loopback"),  # hex
    ("http://127.1/", "127.0.0.1", "loopback"),  # short form
    ("http://127.0.0.1./", "127.0.0.1", "loopback"),  # trailing dot
    ("http://[::1]/", "::1", "loopback"),
    ("http://[::ffff:127.0.0.1]/", "127.0.0.1", "loopback"),  # IPv4-mapped IPv6
    ("http://[::ffff:7f00:1]/", "127.0.0.1", "loopback"),
    ("http://[64:ff9b::a9fe:a9fe]/", "169.254.169.254", "metadata"),  # NAT64
    ("http://0.0.0.0:8000/", "0.0.0.0", "unspecified"),
    ("http://0/", "0.0.0.0", "unspecified"),
    ("http://[::]/", "::", "unspecified"),
    ("http://localhost:8000/", "localhost", "loopback"),
    ("http://LOCALHOST./", "localhost", "loopback"),
    ("http://api.localhost/", "api.localhost", "loopback"),
    ("http://169.254.169.254/latest/meta-data/", "169.254.169.254", "metadata"),
    ("http://2852039166/", "169.254.169.254", "metadata"),  # decimal metadata
    ("http://[fd00:ec2::254]/", "fd00:ec2::254", "metadata"),
    ("http://metadata.google.internal/computeMetadata/v1/", "metadata.google.internal", "metadata"),
    ("http://100.100.100.200/", "100.100.100.200", "metadata"),
    ("http://169.254.1.1/", "169.254.1.1", "link_local"),
    ("http://[fe80::1]/", "fe80::1", "link_local"),
    ("http://10.0.0.5/", "10.0.0.5", "private"),
    ("http://012.0.0.5/", "10.0.0.5", "private"),  # octal private
    ("http://172.16.3.4/", "172.16.3.4", "private"),
    ("https://192.168.1.1:8443/", "192.168.1.1", "private"),
    ("http://[fc00::1]/", "fc00::1", "private"),
    ("http://224.0.0.1/", "224.0.0.1", "multicast"),
    ("http://[ff02::1]/", "ff02::1", "multicast"),
    ("http://100.64.0.1/", "100.64.0.1", "reserved"),  # carrier-grade NAT
    ("http://240.0.0.1/", "240.0.0.1", "reserved"),
]


@pytest.mark.parametrize(("url", "address", "rule"), REFUSED_URLS)
def test_a_refused_address_is_refused_in_every_spelling_naming_the_rule(
    url: str, address: str, rule: str
) -> None:
    refusal = literal_refusal(url, DEFAULT_POLICY)
    assert refusal is not None, url
    assert (refusal.address, refusal.rule) == (address, rule)
    assert f"(rule: {rule})" in str(refusal)
    assert "SWITCHYARD_EGRESS_ALLOW=" in str(refusal)


@pytest.mark.parametrize(
    "url",
    [
        "https://api.example.com/v1",
        "http://93.184.216.34/",
        "http://1.1.1.1./",
        "http://[2606:4700:4700::1111]/",
        "https://{input.host}/path",  # decided at connect time
        "http://1234567890123/",  # not an address; a name, resolved at connect time
    ],
)
def test_public_addresses_and_names_pass_the_literal_check(url: str) -> None:
    assert literal_refusal(url, DEFAULT_POLICY) is None


def test_the_metadata_message_names_the_rule_and_the_setting() -> None:
    refusal = literal_refusal("http://169.254.169.254/", DEFAULT_POLICY)
    assert str(refusal) == (
        "egress refused: 169.254.169.254 is a cloud metadata address (rule: metadata); "
        "allow it with SWITCHYARD_EGRESS_ALLOW=169.254.169.254 if it is meant to be reached"
    )


@pytest.mark.parametrize(
    ("allow", "url", "allowed"),
    [
        (["127.0.0.1"], "http://127.0.0.1:9/", True),
        (["127.0.0.1"], "http://2130706433/", True),  # the entry is the address, however spelt
        (["127.0.0.1"], "http://[::ffff:127.0.0.1]/", True),
        (["127.0.0.1"], "http://127.0.0.2/", False),
        (["127.0.0.0/8"], "http://127.0.0.2/", True),
        (["10.0.0.0/8:8443"], "https://10.1.2.3:8443/", True),
        (["10.0.0.0/8:8443"], "https://10.1.2.3/", False),  # port 443 is not 8443
        (["localhost:8000"], "http://localhost:8000/", True),
        (["localhost:8000"], "http://localhost:8001/", False),
        (["[::1]:8080"], "http://[::1]:8080/", True),
        (["fd00::/8"], "http://[fd12::1]/", True),
        (["api.internal"], "http://API.internal./", True),
        (["10.0.0.5"], "http://169.254.169.254/", False),
    ],
)
def test_the_allow_list_admits_hosts_networks_and_ports_and_nothing_else(
    allow: list[str], url: str, allowed: bool
) -> None:
    assert (literal_refusal(url, parse_allow(allow)) is None) is allowed


@pytest.mark.parametrize("entry", ["", "10.0.0.0/33", "host:0", "host:99999", "a b", ":80"])
def test_an_allow_entry_that_is_not_a_host_or_network_is_refused(entry: str) -> None:
    if not entry:
        assert parse_allow([entry]) == DEFAULT_POLICY
        return
    with pytest.raises(ValueError, match="SWITCHYARD_EGRESS_ALLOW"):
        parse_allow([entry])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2130706433", "127.0.0.1"),
        ("0x7f.1", "127.0.0.1"),
        ("10.1", "10.0.0.1"),
        ("1.2.3.256", None),
        ("1.2.3.4.5", None),
        ("08.0.0.1", None),
    ],
)
def test_hosts_are_read_the_way_inet_aton_reads_them(text: str, expected: str | None) -> None:
    found = egress.parse_address(text)
    assert found == (ipaddress.ip_address(expected) if expected else None)


def http_definition(url: str) -> dict[str, object]:
    return {
        "nodes": [
            {"id": "ok", "handler": "http.request", "config": {"url": "https://api.example.com/"}},
            {"id": "fetch", "handler": "http.request", "config": {"url": url}},
        ],
        "edges": [],
    }


def test_a_definition_naming_a_refused_address_is_refused_naming_the_field() -> None:
    issues = validate_definition(
        http_definition("http://0177.0.0.1:6379/"), limits=Limits(egress=DEFAULT_POLICY)
    )
    assert [(i.path, i.code, i.node) for i in issues] == [("nodes[1].config.url", "egress_refused", "fetch")]
    assert "(rule: loopback)" in issues[0].message


def test_a_definition_is_checked_against_the_allow_list_given() -> None:
    policy = parse_allow(["127.0.0.1:6379"])
    assert validate_definition(http_definition("http://127.0.0.1:6379/"), limits=Limits(egress=policy)) == []


def test_settings_refuse_to_start_on_an_allow_entry_that_is_not_a_host_or_network() -> None:
    with pytest.raises(ImproperlyConfigured, match=r"SWITCHYARD_EGRESS_ALLOW: '10\.0\.0\.0/33'"):
        settings_module.egress_allow("127.0.0.1:11434, 10.0.0.0/33")
    assert settings_module.egress_allow(" 127.0.0.1:11434, ,api.internal ") == [
        "127.0.0.1:11434",
        "api.internal",
    ]
