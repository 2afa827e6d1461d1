"""An attempt's failure may say that no retry can fix it (NodeRun and MapItem `retryable`)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("workflows", "0023_in_flight_counts_waiting")]

    operations = [
        migrations.AddField(
            model_name="noderun",
            name="retryable",
            field=models.BooleanField(db_default=True),
        ),
        migrations.AddField(
            model_name="mapitem",
            name="retryable",
            field=models.BooleanField(db_default=True),
        ),
    ]
