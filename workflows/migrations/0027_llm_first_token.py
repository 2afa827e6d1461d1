"""Time to first token of each streamed LLM call (NULL for an answer read as one body)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("workflows", "0026_budgets")]

    operations = [
        migrations.AddField(
            model_name="llmcall",
            name="first_token_ms",
            field=models.FloatField(blank=True, null=True),
        ),
    ]
