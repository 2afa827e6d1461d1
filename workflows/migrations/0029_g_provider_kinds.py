"""Provider kinds (OpenAI-compatible, Anthropic Messages API) and the prompt-cache token counts of calls."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("workflows", "0029_a_runpage")]

    operations = [
        migrations.AddField(
            model_name="llmprovider",
            name="kind",
            field=models.CharField(
                choices=[("openai", "OpenAI-compatible"), ("anthropic", "Anthropic")],
                default="openai",
                max_length=20,
            ),
        ),
        migrations.AddField(
            model_name="llmcall",
            name="cache_read_tokens",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="llmcall",
            name="cache_write_tokens",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
    ]
