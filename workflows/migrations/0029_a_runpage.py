"""Runs started as test runs are flagged (issue 28); a dead letter may be closed as compensated."""

from typing import Any

from django.db import migrations, models


def mark_test_runs(apps: Any, schema_editor: Any) -> None:
    """Mark the runs started from the editor's Test run before the flag existed (their audit entry says so)."""
    run_model = apps.get_model("workflows", "Run")
    entries = apps.get_model("workflows", "AuditEntry").objects.filter(action="run.test_start", target_type="run")
    ids = [int(pk) for pk in entries.values_list("target_id", flat=True) if pk.isdigit()]
    run_model.objects.filter(pk__in=ids).update(is_test=True)


class Migration(migrations.Migration):

    dependencies = [
        ('workflows', '0029_b_suites'),
    ]

    operations = [
        migrations.AddField(
            model_name='run',
            name='is_test',
            field=models.BooleanField(db_default=False, default=False),
        ),
        migrations.AlterField(
            model_name='deadletter',
            name='status',
            field=models.CharField(choices=[('open', 'open'), ('replayed', 'replayed'), ('discarded', 'discarded'), ('compensated', 'compensated')], default='open', max_length=16),
        ),
        migrations.RunPython(mark_test_runs, migrations.RunPython.noop),
    ]
