from tests.engine.fakes import harness  # noqa: F401

async def test_smoke(harness):
    run = await harness.create(pipeline={"mode": "async", "max_in_flight": 3}, budget={"max_proposals": 5})
    res = await harness.run_to_end(run)
    print(res)
    for r in harness.fake.requests[:40]:
        print(r.seq, r.stage, r.item_id, r.orch_in_flight, repr(r.system[-40:]))
    rec = await harness.record(run.ctx.run_id)
    print(rec.counters, rec.counts)
    assert 0
