"""Create the role groups (controlplane/access.py), so a fresh install can give roles at once.

Idempotent: a group that exists already is kept as it is (its members and permissions
untouched). The names are written out, not imported: a migration must not change when the
code does. Reversing keeps the groups: they may have members by then.
"""

from django.db import migrations

ROLE_GROUPS = ("viewer", "operator", "editor", "admin")


def create_role_groups(apps, schema_editor):
    group = apps.get_model("auth", "Group")
    for name in ROLE_GROUPS:
        group.objects.get_or_create(name=name)


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("workflows", "0008_waits"),
    ]

    operations = [migrations.RunPython(create_role_groups, migrations.RunPython.noop)]
