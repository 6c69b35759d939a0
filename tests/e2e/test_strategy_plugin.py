"""A third-party strategy, with its own options, installed as a package (a dist-info directory
on PYTHONPATH, which importlib.metadata reads as pip would have left it): `evotui strategies`
lists it, `[strategy.beam]` is validated by its model and `--strategy beam` runs it."""

import json
import sqlite3
import textwrap
from pathlib import Path

from tests.e2e.conftest import FAST, evotui, summary_of

PLUGIN = '''
"""beam: a parent among the `width` best artifacts (a test's third-party strategy)."""
import random
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from engine.strategy.parts import ParentOnly, Population
from engine.strategy.protocols import Pick, SearchParams, Strategy
from engine.strategy.registry import register


class BeamOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    width: int = Field(2, ge=1)


@dataclass(frozen=True)
class BeamSelector:
    width: int
    name: str = "uniform among the best `width`"

    def pick(self, archive, instances, rng: random.Random) -> Pick:
        best = sorted(archive.live(), key=lambda a: (-a.val_mean, a.created_version))[: self.width]
        return Pick(rng.choice(best).artifact_id, {"beam_width": self.width})

    def merge_weights(self, archive, instances):
        return {}


@register("beam", "a parent among the best few (plug-in)", options=BeamOptions)
def beam(params: SearchParams) -> Strategy:
    opts = BeamOptions(**params.options.get("beam", {}))
    return Strategy(name="beam", summary="beam", selector=BeamSelector(opts.width), context=ParentOnly(),
                    acceptance=Population(), merges=False)
'''


def install(site: Path, name: str, entry_points: str, modules: dict[str, str]) -> None:
    """What `pip install` leaves: the modules and NAME-0.1.dist-info with the entry points."""
    for module, text in modules.items():
        (site / f"{module}.py").write_text(textwrap.dedent(text))
    info = site / f"{name.replace('-', '_')}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[evotui.strategies]\n{entry_points}\n")


def test_an_installed_strategy_is_listed_validated_and_runs(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    install(site, "beam-strategy", "beam = beam_strategy", {"beam_strategy": PLUGIN})
    env = {"PYTHONPATH": str(site)}

    listed = evotui("strategies", "-v", env=env)
    assert listed.returncode == 0, listed.stderr
    line = next(ln for ln in listed.stdout.splitlines() if ln.startswith("beam "))
    assert "(plug-in: beam-strategy)" in line
    assert "options: [strategy.beam] width" in listed.stdout
    assert "selection: uniform among the best `width`" in listed.stdout

    bad = tmp_path / "bad.toml"
    bad.write_text("[strategy]\nname = 'beam'\n[strategy.beam]\nwidth = 0\n")
    refused = evotui("run", "rules", "--no-ui", "--db", str(tmp_path / "bad.db"), "--config", str(bad),
                     "--max-proposals", "2", *FAST, env=env)
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [
        f"evotui: error: {bad}: 'strategy.beam.width': Input should be greater than or equal to 1"]

    good = tmp_path / "good.toml"
    good.write_text("[strategy.beam]\nwidth = 3\n")
    db = tmp_path / "r.db"
    proc = evotui("run", "rules", "--no-ui", "--db", str(db), "--strategy", "beam", "--config", str(good),
                  "--mode", "async", "--max-proposals", "6", *FAST, env=env)
    assert proc.returncode == 0, proc.stderr
    s = summary_of(proc)
    assert s["strategy"] == "beam" and s["status"] == "completed" and s["proposal_attempts"] == 6
    con = sqlite3.connect(db)
    config = json.loads(con.execute("SELECT config_json FROM runs").fetchone()[0])
    assert config["strategy"]["name"] == "beam" and config["strategy"]["beam"] == {"width": 3}
    metas = [json.loads(m or "{}") for (m,) in con.execute("SELECT meta_json FROM artifacts WHERE status != 'seed'")]
    assert metas and all(m.get("selection") == {"beam_width": 3} for m in metas)

    # Without the package the stored run's table names a strategy nobody provides: refused, one line.
    gone = evotui("resume", s["run_id"], "--no-ui", "--db", str(db), "--max-proposals", "8", "--quiet")
    assert gone.returncode == 2 and len(gone.stderr.strip().splitlines()) == 1, gone.stderr
    assert "strategy.beam" in gone.stderr


def test_a_broken_plugin_is_reported_and_the_others_still_run(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    install(site, "broken-strategy", "broken = broken_strategy", {"broken_strategy": "raise ImportError('no numpy here')\n"})
    env = {"PYTHONPATH": str(site)}
    listed = evotui("strategies", env=env)
    assert listed.returncode == 0 and "gepa " in listed.stdout
    assert ("evotui: warning: strategy plug-in 'broken' of broken-strategy failed to load (broken_strategy): "
            "ImportError: no numpy here") in listed.stderr
    run = evotui("run", "rules", "--no-ui", "--db", str(tmp_path / "r.db"), "--strategy", "broken",
                 "--max-proposals", "2", *FAST, env=env)
    assert run.returncode == 2
    assert run.stderr.strip().splitlines() == [
        "evotui: error: strategy plug-in 'broken' of broken-strategy failed to load (broken_strategy): "
        "ImportError: no numpy here"]
