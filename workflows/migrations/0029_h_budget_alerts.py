from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("workflows", "0028_b_topics")]

    operations = [
        migrations.AddField(
            model_name="budgetledger",
            name="threshold_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="budgetledger",
            name="exhausted_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
