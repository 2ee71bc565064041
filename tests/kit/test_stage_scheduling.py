"""tilekit.testing.gpu_workers.StageScheduling, the xdist scheduler of --stage-log sessions, driven on the
CPU the way pytest-xdist 3.8.0's controller (xdist.dsession.DSession) drives a scheduler, with
stand-in workers that behave like xdist's (xdist.remote.WorkerInteractor): a worker runs the cases
it was sent in order, and runs one only once it knows the next one or was told to shut down.

The property test lets hypothesis pick every interleaving (which worker moves next, when a
replacement comes up, which cases crash their worker) and checks what must hold for any of them:
the session ends, every case runs exactly once or is reported crashed exactly once, a crashed case
is never sent again, nothing finished is sent again, no empty send. No real process, no clock.
"""

from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilekit.testing.gpu_workers import StageScheduler, StageScheduling


class Worker:
    """What StageScheduling sees of an xdist WorkerController, and what the worker process does."""

    def __init__(self, wid: str, finished: set = frozenset(), crashed: set = frozenset()) -> None:
        self.gateway = SimpleNamespace(id=wid)
        self.finished = finished  # indices some worker already ran: never to be sent again
        self.crashed = crashed  # indices that crashed a worker: never to be sent again
        self.todo: list[int] = []  # received, not run yet
        self.sent: list[list[int]] = []
        self.shutting_down = False
        self.ready = self.collected = False

    def send_runtest_some(self, indices) -> None:
        assert indices, f"{self.gateway.id}: an empty send, which a worker never answers"
        assert not self.shutting_down, f"{self.gateway.id}: work sent after shutdown"
        assert not self.finished.intersection(indices), f"{self.gateway.id}: finished cases sent again"
        assert not self.crashed.intersection(indices), f"{self.gateway.id}: a crashed case sent again"
        self.sent.append(list(indices))
        self.todo.extend(indices)

    def shutdown(self) -> None:
        self.shutting_down = True

    def can_run(self) -> bool:
        return len(self.todo) >= 2 or (bool(self.todo) and self.shutting_down)


class Config:
    """The little of pytest.Config the scheduler uses."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.collect_reports: list = []
        self.hook = SimpleNamespace(pytest_collectreport=lambda report: self.collect_reports.append(report))
        self.pluginmanager = SimpleNamespace(get_plugin=lambda name: self if name == "terminalreporter" else None)

    def write_line(self, line: str) -> None:
        self.lines.append(line)


def stage(nodeid: str):
    """The stage of a node id of the form '<kernel>/<backend>/<n>'."""
    return tuple(nodeid.split("/")[:2])


class Session:
    """DSession's handling of worker events, reduced to what touches the scheduler."""

    def __init__(self, collection: list[str], workers: int, crash: set = frozenset(), max_restart=None) -> None:
        self.collection = collection
        self.crash = crash
        self.config = Config()
        self.sched = StageScheduling(self.config, workers, stage=stage)
        self.max_restart = 4 * workers if max_restart is None else max_restart  # xdist's default
        self.finished: set[int] = set()
        self.crashed_indices: set[int] = set()
        self.active = [Worker(f"gw{i}", self.finished, self.crashed_indices) for i in range(workers)]
        self.all_workers = list(self.active)  # every worker the session had, replacements included
        self.shuttingdown = False
        self.ran: list[tuple[str, str]] = []  # (node id, worker)
        self.crashed: list[str] = []
        self.failed_nodes = 0

    def moves(self) -> list[tuple[str, Worker]]:
        out = []
        for w in self.active:
            if not w.ready:
                out.append(("ready", w))
            elif not w.collected:
                out.append(("collected", w))
            elif w.can_run():
                out.append(("run", w))
            elif w.shutting_down and not w.todo:
                out.append(("finish", w))
        return out

    def triggershutdown(self) -> None:
        self.shuttingdown = True
        for w in self.sched.nodes:
            w.shutdown()

    def step(self, move: str, w: Worker) -> None:
        if move == "ready":  # worker_workerready
            w.ready = True
            if self.shuttingdown:
                w.shutdown()
            else:
                self.sched.add_node(w)
        elif move == "collected":  # worker_collectionfinish
            w.collected = True
            if not self.shuttingdown:
                self.sched.add_node_collection(w, list(self.collection))
                if self.sched.collection_is_completed:
                    self.sched.schedule()
        elif move == "run":
            index = w.todo.pop(0)
            nodeid = self.collection[index]
            if nodeid in self.crash:  # worker_errordown
                self.active.remove(w)
                try:
                    crashitem = self.sched.remove_node(w)
                except KeyError:
                    crashitem = None
                assert crashitem == nodeid, (crashitem, nodeid)
                self.crashed.append(crashitem)
                self.crashed_indices.add(index)
                self.failed_nodes += 1
                if self.failed_nodes > self.max_restart:
                    self.triggershutdown()
                else:
                    self.shuttingdown = False
                    # DSession._clone_node: the same spec (the same GPU), a new id
                    clone = Worker(f"gw{len(self.all_workers)}", self.finished, self.crashed_indices)
                    self.active.append(clone)
                    self.all_workers.append(clone)
            else:  # worker_runtest_protocol_complete
                self.ran.append((nodeid, w.gateway.id))
                self.finished.add(index)
                self.sched.mark_test_complete(w, index)
        elif move == "finish":  # worker_workerfinished
            self.active.remove(w)
            if w in self.sched.nodes:
                assert self.sched.remove_node(w) is None
        if self.sched.tests_finished:
            self.triggershutdown()

    def run(self, pick=lambda moves: moves[0]) -> None:
        for _ in range(10_000):
            if self.shuttingdown and not self.active:
                return  # DSession.session_finished
            assert self.active, "no worker left: DSession would stop with 'Unexpectedly no active workers'"
            moves = self.moves()
            assert moves, f"hang: nothing can move (scheduler queue {list(self.sched.queue)})"
            self.step(*pick(moves))
        raise AssertionError("the session did not end in 10000 events")

    def sends(self) -> list[list[str]]:
        return [[self.collection[i] for i in unit] for w in self.all_workers for unit in w.sent]


def suite(sizes: dict) -> list[str]:
    """Node ids '<kernel>/<backend>/<n>' in collection order, for {(kernel, backend): cases}."""
    return [f"{k}/{b}/{n}" for (k, b), count in sizes.items() for n in range(count)]


def twelve_stages() -> list[str]:
    return suite({(k, b): 4 for k in ("alpha", "beta", "gamma", "delta") for b in ("cutile_rs", "triton", "torch")})


# ---------------------------------------------------------------------------------------------
# Units of work


def test_whole_stages_go_out_largest_first_when_they_balance_the_workers():
    collection = suite({("a", "torch"): 2, ("b", "torch"): 5, ("c", "torch"): 3, ("d", "torch"): 2})
    session = Session(collection, 2)  # largest stage 5, 2 * 2 * 5 > 12: cases one at a time
    session.run()
    assert not session.sched.by_stage
    sizes = {
        ("a", "torch"): 2,
        ("b", "torch"): 3,
        ("c", "torch"): 3,
        ("d", "torch"): 2,
        ("e", "torch"): 3,
        ("f", "torch"): 1,
    }  # 14 cases, largest stage 3: 2 * 2 * 3 <= 14, whole stages
    session = Session(suite(sizes), 2)
    session.run()
    assert session.sched.by_stage
    sends = session.sends()
    assert sorted(map(sorted, sends)) == sorted(sorted(n for n in suite(sizes) if stage(n) == s) for s in sizes)
    first_two = sorted(len(unit) for w in session.all_workers[:2] for unit in w.sent[:1])
    assert first_two == [3, 3]  # each worker starts with one of the largest stages
    assert session.config.lines == ["tilekit gpu_workers: 14 cases in 6 stages over 2 workers: handed out by stage"]


def test_each_stage_runs_on_one_worker_and_every_worker_gets_work():
    session = Session(twelve_stages(), 2)
    session.run()
    assert sorted(n for n, _ in session.ran) == sorted(twelve_stages())
    by_stage: dict = {}
    for nodeid, worker in session.ran:
        by_stage.setdefault(stage(nodeid), set()).add(worker)
    assert len(by_stage) == 12 and all(len(workers) == 1 for workers in by_stage.values())
    assert set().union(*by_stage.values()) == {"gw0", "gw1"}


def test_a_single_stage_is_handed_out_case_by_case_to_every_worker():
    session = Session(suite({("alpha", "cutile_rs"): 4}), 2)
    session.run()
    assert not session.sched.by_stage
    assert {w.gateway.id: w.sent for w in session.all_workers} == {"gw0": [[0], [1]], "gw1": [[2], [3]]}
    assert session.config.lines == [
        ("tilekit gpu_workers: 4 cases in 1 stage over 2 workers: handed out one case at a time")
    ]


def test_fewer_units_than_workers_shuts_the_idle_worker_down_at_once():
    session = Session(suite({("alpha", "cutile_rs"): 1}), 2)
    session.step("ready", session.active[0])
    session.step("ready", session.active[1])
    session.step("collected", session.active[0])
    session.step("collected", session.active[1])
    assert [(w.sent, w.shutting_down) for w in session.active] == [([[0]], True), ([], True)]
    session.run()
    assert session.ran == [("alpha/cutile_rs/0", "gw0")]


def test_workers_that_collected_different_cases_run_nothing_and_say_so():
    session = Session(suite({("a", "x"): 2}), 2)
    gw0, gw1 = session.active
    for w in (gw0, gw1):
        session.sched.add_node(w)
    session.sched.add_node_collection(gw0, ["a/x/0", "a/x/1"])
    session.sched.add_node_collection(gw1, ["a/x/1", "a/x/0"])  # e.g. parameters from a set
    session.sched.schedule()
    assert (gw0.sent, gw1.sent, gw0.shutting_down, gw1.shutting_down) == ([], [], True, True)
    assert session.sched.tests_finished
    [report] = session.config.collect_reports
    assert report.failed and report.longrepr.startswith("tilekit gpu_workers: workers collected different tests")


def test_an_empty_collection_ends_the_session():
    session = Session([], 2)
    session.run()
    assert session.ran == [] and session.config.lines == []


# ---------------------------------------------------------------------------------------------
# A worker that crashes


def test_the_crashed_case_is_reported_once_and_the_workers_other_cases_still_run():
    collection = twelve_stages()
    session = Session(collection, 2, crash={"alpha/triton/2"})
    session.run()
    assert session.crashed == ["alpha/triton/2"]
    assert sorted(n for n, _ in session.ran) == sorted(set(collection) - {"alpha/triton/2"})
    assert sum(unit.count("alpha/triton/2") for unit in session.sends()) == 1  # never sent again
    assert [w.gateway.id for w in session.all_workers] == ["gw0", "gw1", "gw2"]  # one replacement


def test_a_case_that_crashes_every_worker_it_reaches_is_run_once():
    """xdist's loadscope/loadgroup put the crashed case back in the queue: it would crash every
    replacement until --max-worker-restart stops the session."""
    collection = suite({("alpha", "triton"): 3})
    session = Session(collection, 1, crash={"alpha/triton/0"})
    session.run()
    assert session.crashed == ["alpha/triton/0"] and [n for n, _ in session.ran] == collection[1:]


def test_a_worker_that_crashes_after_the_queue_emptied_leaves_its_cases_to_its_replacement():
    collection = suite({("a", "x"): 3})
    session = Session(collection, 2, crash={"a/x/0"})
    for w in list(session.active):
        session.step("ready", w)
    for w in list(session.active):
        session.step("collected", w)
    gw0, gw1 = session.active
    assert (gw0.sent, gw1.sent, gw1.shutting_down) == ([[0], [1]], [[2]], True)  # the queue is empty
    session.step("run", gw0)  # a/x/0 crashes gw0; a/x/1 goes back to the queue
    assert list(session.sched.queue) == [[1]] and gw1.sent == [[2]]  # gw1 was told to shut down
    session.run()
    assert session.crashed == ["a/x/0"] and sorted(session.ran) == [("a/x/1", "gw2"), ("a/x/2", "gw1")]


def test_a_replacement_that_collected_other_cases_gets_no_work():
    session = Session(suite({("a", "x"): 4}), 1)
    gw0 = session.active[0]
    session.step("ready", gw0)
    session.step("collected", gw0)
    stranger = Worker("gw1")
    session.sched.add_node(stranger)
    session.sched.add_node_collection(stranger, ["a/x/0"])
    session.sched.schedule()
    assert stranger.sent == [] and stranger.shutting_down


def test_a_pytest_handlecrashitem_hook_may_run_the_crashed_case_again():
    collection = suite({("a", "x"): 3})
    session = Session(collection, 1, crash={"a/x/1"})
    session.step("ready", session.active[0])
    session.step("collected", session.active[0])
    session.step("run", session.active[0])  # a/x/0
    session.step("run", session.active[0])  # a/x/1 crashes
    session.crash = set()
    session.crashed_indices.clear()  # sent again on purpose
    session.sched.mark_test_pending("a/x/1")  # what pytest-rerunfailures does from the hook
    session.run()
    assert session.crashed == ["a/x/1"] and sorted(n for n, _ in session.ran) == collection


# ---------------------------------------------------------------------------------------------
# Any interleaving

stage_sizes = st.dictionaries(
    st.tuples(st.sampled_from("abcd"), st.sampled_from(["cutile_rs", "triton", "torch"])),
    st.integers(1, 6),
    min_size=1,
    max_size=8,
)


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(sizes=stage_sizes, workers=st.integers(1, 4), data=st.data())
def test_any_interleaving_ends_with_every_case_run_once_or_crashed_once(sizes, workers, data):
    collection = suite(sizes)
    crash = set(data.draw(st.lists(st.sampled_from(collection), max_size=3, unique=True), label="crash"))
    session = Session(collection, workers, crash=crash)
    session.run(lambda moves: moves[data.draw(st.integers(0, len(moves) - 1))])
    ran = [n for n, _ in session.ran]
    assert sorted(ran) == sorted(set(collection) - crash)  # each exactly once
    assert sorted(session.crashed) == sorted(crash)  # each reported once, and never sent again (Worker)
    if not crash and session.sched.by_stage:
        workers_of: dict = {}
        for nodeid, worker in session.ran:
            workers_of.setdefault(stage(nodeid), set()).add(worker)
        assert all(len(ws) == 1 for ws in workers_of.values())  # whole stages, without a crash


# ---------------------------------------------------------------------------------------------
# The plugin hook


def make_scheduler(dist: str, workers: int):
    plugin = StageScheduler()
    config = Config()
    config.getvalue = {"dist": dist}.get
    plugin.pytest_xdist_setupnodes(config, ["popen"] * workers)
    return plugin.pytest_xdist_make_scheduler(config, log=None)


def test_the_plugin_schedules_dist_load_and_leaves_any_other_dist_to_xdist():
    sched = make_scheduler("load", 2)
    assert isinstance(sched, StageScheduling) and sched.numnodes == 2
    for dist in ("loadscope", "loadgroup", "loadfile", "worksteal", "each"):
        assert make_scheduler(dist, 2) is None


def test_worksteal_requests_are_refused():
    with pytest.raises(NotImplementedError):
        make_scheduler("load", 1).remove_pending_tests_from_node(Worker("gw0"), [0])
