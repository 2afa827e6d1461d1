import time, pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from workflows import keys, versions
pytestmark = pytest.mark.django_db

def test_prof(api, chain, settings):
    settings.SWITCHYARD = {**settings.SWITCHYARD, "API_RATE_LIMIT_PER_MINUTE": 10**9}
    for n in range(50):
        api.post("workflows/chain/runs", {"input": {"n": n}}, headers={"Idempotency-Key": f"w{n}"})
    best = []
    for rep in range(3):
        t = time.perf_counter()
        for n in range(200):
            r = api.post("workflows/chain/runs", {"input": {"n": n}}, headers={"Idempotency-Key": f"k{rep}-{n}"})
        best.append((time.perf_counter()-t)/200*1000)
    print("\nper start ms", [round(b, 2) for b in best])
    t = time.perf_counter()
    for n in range(500): keys.verify(api.token)
    print("verify ms", (time.perf_counter()-t)/500*1000)
    t = time.perf_counter()
    for n in range(500): versions.get_workflow("chain")
    print("get_workflow ms", (time.perf_counter()-t)/500*1000)
    t = time.perf_counter()
    for n in range(500):
        with connection.cursor() as cur: cur.execute("SELECT 1"); cur.fetchall()
    print("SELECT 1 ms", (time.perf_counter()-t)/500*1000)
    with CaptureQueriesContext(connection) as q:
        api.post("workflows/chain/runs", {"input": {"n": 1}}, headers={"Idempotency-Key": "zz"})
    print("statements", len(q.captured_queries))
