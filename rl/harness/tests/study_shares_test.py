"""A study's members split into fixed shares (`study --share INDEX/COUNT`) and gathered back: the split, bad input
(one line each), and the whole study's record from its shares' records."""

import dataclasses
import datetime
import json

import pytest

from rl.harness.commands import cli
from rl.harness.commands import study as study_command
from rl.harness.errors import EXIT_USAGE, UsageError
from rl.harness.study import Study, StudyRecord, shares
from rl.harness.study.record import COMPLETED, PENDING, RUNNING

STUDY = Study(
    agents={"first": "rl.harness.tests.fake_recipe", "second": "rl.harness.tests.fake_recipe"}, seeds=(0, 1, 2)
)


def _names(members):
    return [f"{member.agent}/{member.seed}" for member in members]


def test_member_i_belongs_to_share_i_mod_count():
    # The study's order: seed by seed, agent by agent.
    split = [_names(shares.Share.parse("s1", f"{k}/4").members(STUDY.members())) for k in range(4)]
    assert split == [["first/0", "first/2"], ["second/0", "second/2"], ["first/1"], ["second/1"]]


def test_the_share_record_is_named_after_the_whole_study():
    assert shares.Share.parse("s1", "2/3").record_id == "s1.share-2-of-3"
    assert shares.is_share_of("s1", "s1.share-2-of-3") and not shares.is_share_of("s1", "s10.share-2-of-3")


@pytest.mark.parametrize(
    ("study_id", "text", "message"),
    [
        ("s1", "3/3", "--share '3/3': expected INDEX/COUNT with 0 <= INDEX < COUNT, e.g. 0/3"),
        ("s1", "1/0", "--share '1/0': expected INDEX/COUNT with 0 <= INDEX < COUNT"),
        ("s1", "-1/3", "--share '-1/3': expected INDEX/COUNT"),
        ("s1", "one/3", "--share 'one/3': expected INDEX/COUNT"),
        (None, "0/3", "--share 0/3 runs a share of one study: name it with --study-id"),
        ("a/b", "0/3", "study id 'a/b' contains '/'"),
    ],
)
def test_a_bad_share_is_refused_in_one_line(study_id, text, message):
    with pytest.raises(UsageError) as refused:
        shares.Share.parse(study_id, text)
    assert str(refused.value).startswith(message) and "\n" not in str(refused.value)


def _share_record(share, statuses):
    record = StudyRecord.new(
        share.record_id, module="m", study=STUDY, smoke=True, code={}, build={}, command_line=["study", share.record_id]
    )
    mine = share.members(STUDY.members())
    members = tuple(
        dataclasses.replace(member, status=statuses.pop(0), runs=(f"s1-{member.agent}-s{member.seed}",))
        for member in record.members
        if member.member in mine
    )
    return record.replace(members=members, share=dataclasses.asdict(share))


def test_the_whole_study_is_its_shares_members_in_the_study_order():
    first = _share_record(shares.Share("s1", 0, 3), [COMPLETED, RUNNING])
    third = _share_record(shares.Share("s1", 2, 3), [COMPLETED, COMPLETED])  # share 1 never recorded anything
    whole = shares.gather("s1", [third, first])
    assert whole.study_id == "s1" and whole.share is None and whole.status == RUNNING
    assert [(f"{m.agent}/{m.seed}", m.status, m.runs) for m in whole.members] == [
        ("first/0", COMPLETED, ("s1-first-s0",)),
        ("second/0", PENDING, ()),
        ("first/1", COMPLETED, ("s1-first-s1",)),
        ("second/1", RUNNING, ("s1-second-s1",)),
        ("first/2", PENDING, ()),
        ("second/2", COMPLETED, ("s1-second-s2",)),
    ]


def test_records_of_another_study_are_not_gathered():
    other = _share_record(shares.Share("s2", 0, 3), [COMPLETED, COMPLETED])
    with pytest.raises(UsageError, match="the records given are not shares of study s1"):
        shares.gather("s1", [other])


# ---- `study --share`: the command (members run in this process, as their trials start them; no Ray) ----------------

FAKE_STUDY = "rl.harness.tests.fake_study"  # members first/0, second/0, first/1, second/1


def test_a_share_runs_its_members_named_after_the_whole_study_and_the_same_command_continues_it(tmp_path, capsys):
    where = ["--results-dir", str(tmp_path / "results"), "--artifacts-dir", str(tmp_path / "artifacts")]
    argv = ["rl-harness", "study", FAKE_STUDY, *where, "--study-id", "s1", "--share", "1/2"]
    command = study_command.StudyCommand(cli.parse(argv)[1])
    assert command.record.study_id == "s1.share-1-of-2" and command.record.share == {
        "study_id": "s1",
        "index": 1,
        "count": 2,
    }
    (first, second) = command._plan()
    assert [first.run_id, second.run_id] == ["s1-second-s0", "s1-second-s1"]
    assert cli.main(["rl-harness", *first.on_node({})[0][3:]]) == 0  # second/1 never starts: its machine was lost
    command.record.write(command.folder)
    command._refresh({}, final=True)

    again = study_command.StudyCommand(cli.parse(argv)[1])  # the replacement: the same command line
    assert again.record.study_id == "s1.share-1-of-2"
    assert [trial.run_id for trial in again._plan()] == ["s1-second-s1"]  # only what is not completed
    assert cli.main(["rl-harness", *again._plan()[0].on_node({})[0][3:]]) == 0
    again.record.write(again.folder)
    again._refresh({}, final=True)
    assert again._share_done() == 0
    assert [(m.agent, m.seed, m.status) for m in StudyRecord.read(again.folder).members] == [
        ("second", 0, COMPLETED),
        ("second", 1, COMPLETED),
    ]
    assert "study s1: share 1/2 ended, 2 of its 2 member(s) completed; the whole study's summary:" in (
        capsys.readouterr().out
    )


def test_a_share_goes_with_a_study_id_only(tmp_path, capsys):
    argv = [
        "rl-harness",
        "study",
        FAKE_STUDY,
        "--results-dir",
        str(tmp_path / "r"),
        "--artifacts-dir",
        str(tmp_path / "a"),
    ]
    assert cli.main([*argv, "--resume", "s1", "--share", "0/2"]) == EXIT_USAGE
    assert "--share starts or continues a share of a study: it goes with --study-id only" in capsys.readouterr().err
    assert cli.main([*argv, "--share", "0/2"]) == EXIT_USAGE
    assert "--share 0/2 runs a share of one study: name it with --study-id" in capsys.readouterr().err


def test_a_share_continued_elsewhere_resumes_a_member_its_lost_machine_left_running(tmp_path, capsys):
    where = ["--results-dir", str(tmp_path / "results"), "--artifacts-dir", str(tmp_path / "artifacts")]
    argv = ["rl-harness", "study", FAKE_STUDY, *where, "--study-id", "s1", "--share", "0/2"]
    command = study_command.StudyCommand(cli.parse(argv)[1])
    cut = command._plan()[0]
    assert cli.main(["rl-harness", *cut.on_node({})[0][3:]]) == 0
    # As its record reads once its machine is lost: running, on another machine, its heartbeat still fresh.
    (path,) = (tmp_path / "results").rglob(f"{cut.run_id}/run_manifest.json")
    manifest = json.loads(path.read_text())
    manifest["status"], manifest["ended_at"] = "running", None
    manifest["heartbeat"]["at"] = datetime.datetime.now(datetime.UTC).isoformat()
    manifest["process"]["hostname"] = "the-lost-machine"
    path.write_text(json.dumps(manifest))
    command.record.write(command.folder)
    command._refresh({}, final=True)

    again = study_command.StudyCommand(cli.parse(argv)[1])  # the same command line, on the replacement
    resumed = again._plan()[0]
    assert resumed.run_id == f"{cut.run_id}-a2" and ["--resume-from", cut.run_id] == [
        word for word in resumed.argv if word in ("--resume-from", cut.run_id)
    ]
    by_hand = [*argv[:-4], "--resume", "s1.share-0-of-2"]  # elsewhere, `--resume` waits for a running member
    assert cli.main(by_hand) == EXIT_USAGE and f"run {cut.run_id} is still running" in capsys.readouterr().err
