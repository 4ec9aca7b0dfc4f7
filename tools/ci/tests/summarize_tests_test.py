from tools.ci import summarize_tests

LOG = """\
INFO: Build completed, 1 test FAILED, 9 total actions
//rl:layering_test                                              (cached) PASSED in 1.1s
//rl/envs:hmm_test                                                       FAILED in 2.0s
//rl/envs:broken_test                                          FAILED TO BUILD
//tools/cc_smoke:cc_smoke_test                                           PASSED in 0.1s
"""


def _xml(path, passed, failed, skipped=0):
    cases = [f"<testcase name='p{i}'/>" for i in range(passed)]
    cases += [f"<testcase name='f{i}'><failure message='x'/></testcase>" for i in range(failed)]
    cases += [f"<testcase name='s{i}'><skipped/></testcase>" for i in range(skipped)]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"<testsuites><testsuite>{''.join(cases)}</testsuite></testsuites>")


def test_status_lines_are_parsed_with_cached_and_build_failures():
    statuses = summarize_tests.target_statuses(LOG)
    assert statuses == {
        "//rl:layering_test": "PASSED",
        "//rl/envs:hmm_test": "FAILED",
        "//rl/envs:broken_test": "FAILED TO BUILD",
        "//tools/cc_smoke:cc_smoke_test": "PASSED",
    }


def test_counts_cases_from_junit_and_at_least_one_failure_per_bad_target(tmp_path):
    _xml(tmp_path / "rl/layering_test/test.xml", passed=7, failed=0, skipped=1)
    _xml(tmp_path / "rl/envs/hmm_test/test.xml", passed=3, failed=2)
    statuses = summarize_tests.target_statuses(LOG)
    # layering 7 + hmm 3 + cc_smoke (no XML) 1 passed; hmm 2 + broken 1 failed.
    assert summarize_tests.summarize(statuses, tmp_path) == (11, 3, 1)


def test_main_prints_the_closing_line_and_fails(tmp_path, capsys):
    log = tmp_path / "test.log"
    log.write_text(LOG)
    assert summarize_tests.main([str(log), str(tmp_path)]) == 1
    assert capsys.readouterr().out.splitlines()[-1] == "2 passed, 2 failed"


def test_no_tests_at_all_is_a_failure(tmp_path):
    log = tmp_path / "test.log"
    log.write_text("INFO: nothing\n")
    assert summarize_tests.main([str(log), str(tmp_path)]) == 1
