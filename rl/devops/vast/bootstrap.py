"""The onstart script: checks out pinned commits, installs Bazel, runs one seed of one experiment.

    from rl.devops.vast import bootstrap

    plan = bootstrap.Bootstrap(
        repo=bootstrap.GitPin("https://github.com/me/research.git", "3f2a..."),   # 40 hex digits
        library=bootstrap.GitPin("https://github.com/me/rl-harness.git", "9c1e..."),   # built instead of its pin
        upload_artifacts=True,              # the harness mirrors artifacts to B2
        max_hours=6.0)
    job = bootstrap.Job(target="//experiments/mess3:reward_only", seed=3,
                        run_id="20250102T030405Z-ab12cd-3", extra_args=("--smoke",))
    script = bootstrap.render(plan, job)    # passed as the instance's onstart

What the script does on the instance, each step announced by an `RLH_PHASE`
line on the container log (which `vast logs` shows):
1. installs what is missing (git, rsync, zip, python3.11, Bazel via Debian's
   `bazel-bootstrap`) with apt;
2. fetches the experiment repo, and the library when it is a separate repo,
   at the pinned commits and checks `git rev-parse HEAD` equals the pin; the
   library checkout is handed to the build as `RL_HARNESS_LOCAL_PATH`, the
   variable the template's `rl_harness_library` rule reads
   (experiments_template/tools/rl_library.bzl), so the run records it
   (`build.library.local_checkout`, and its commit in `code.library`);
3. the environment: with a store configured, unpacks the CUDA lock's venv from it when an instance
   built it before (`prebuilt.py`: keyed by the lock and the interpreter, sha256-verified), into
   `$RL_PYTHON_VENV_CACHE` (`WORKDIR/venvs`), where the build finds it complete; else the build
   makes it, and once complete it is packed into the store beside the run for the next instance;
4. `bazel run --repo_env=RL_PYTHON_LOCK=cuda <target> -- --seed N --run-id R --results-dir OUT/results
   --artifacts-dir OUT/artifacts [--upload-artifacts] <extra args>` (a study's share: `--study-id S --share k/K`
   instead of `--seed` and `--run-id`) under
   `timeout` (SIGTERM after `max_hours`, so the harness checkpoints and stops);
5. always (an EXIT trap), waits for a venv being packed, writes `OUT/vast/<run-id>/SHA256SUMS` over every
   file under results/ and artifacts/, then prints `RLH_DONE exit_code=N`.

Secrets never appear in the script (it is visible in the instance record):
they arrive as environment variables. A git token reaches git through a
GIT_ASKPASS helper that reads it from the environment, never a URL or argv,
and is unset once the checkouts are done, so the build and the run never see it.
Remotes are https://, ssh:// or git@host:path only, and reach git after `--`.
"""

from __future__ import annotations

import dataclasses
import re
import shlex

from rl.devops.vast import prebuilt, redact
from rl.harness import env_vars
from rl.harness.run import status

# The environment variable the instance reads a git token from (set through the create call's env).
GIT_TOKEN_ENV = "RLH_GIT_TOKEN"

# Where a dependent workspace's `rl_harness_library` rule takes the library from instead of its pin
# (experiments_template/tools/rl_library.bzl); the rule then records the checkout in the build identity.
LIBRARY_CHECKOUT_ENV = "RL_HARNESS_LOCAL_PATH"
DONE_MARKER = "RLH_DONE"
END_MARKER = "RLH_END"  # the instance ends itself: "RLH_END completed|failed|deadline"
PHASE_MARKER = "RLH_PHASE"
DEFAULT_WORKDIR = "/workspace/rlh"
# Every offer rented has a GPU (offers.Gates.num_gpus >= 1): build the venv from the CUDA lock.
# --repo_env rather than --config=cuda, which a dependent workspace's .bazelrc may not define.
CUDA_LOCK_FLAG = "--repo_env=RL_PYTHON_LOCK=cuda"
CUDA_LOCK_FILE = "requirements_lock_cuda.txt"  # the library's lock that flag selects

# Matched whole (re.fullmatch): `$` alone would let a trailing newline through into the script.
_COMMIT = re.compile(r"[0-9a-f]{40}")
_TARGET = re.compile(r"//[A-Za-z0-9_./+-]*:[A-Za-z0-9_.+-]+")
_USERINFO_IN_URL = re.compile(r"([a-z][a-z0-9+.-]*)://([^/@]+)@", re.IGNORECASE)  # URL schemes are case-insensitive
# The remotes an instance may fetch from: https://, ssh:// and git@host:path (nothing git could read as an option,
# no local path, no ext:: or file:// transport).
_REMOTE = re.compile(r"https://[^\s/@]+/\S+|ssh://[^\s/]+/\S+|git@[A-Za-z0-9.-]+:[A-Za-z0-9_~][^\s]*", re.IGNORECASE)


def _carries_credentials(url: str) -> bool:
    """True for a URL with a user (a token) or a password in it; `ssh://user@host` names only a login."""
    match = _USERINFO_IN_URL.match(url)
    return bool(match) and (match.group(1).lower() != "ssh" or ":" in match.group(2))


@dataclasses.dataclass(frozen=True)
class GitPin:
    """A repository at one full commit id (a branch or tag would not be reproducible)."""

    url: str
    commit: str

    def __post_init__(self):
        if not _COMMIT.fullmatch(self.commit):
            raise redact.DevopsError(
                f"commit {self.commit!r} of {self.url} is not a full 40-digit lowercase sha; pin the exact "
                "commit (git rev-parse HEAD)"
            )
        if _carries_credentials(self.url):
            raise redact.DevopsError(
                f"the URL of {self.url} carries credentials; remove them and export ${GIT_TOKEN_ENV} instead"
            )
        if not _REMOTE.fullmatch(self.url):
            raise redact.DevopsError(
                f"remote {self.url!r} is not an https://, ssh:// or git@host:path URL; pass the repository's clone URL"
            )


@dataclasses.dataclass(frozen=True)
class StudyShare:
    """A study target's fixed share of its members: member i runs in share i mod `count` (`study --share`)."""

    study_id: str
    index: int
    count: int

    def __post_init__(self):
        if problem := status.run_id_problem(self.study_id):
            raise redact.DevopsError(problem.replace("run id", "study id"))
        if not 0 <= self.index < self.count:
            raise redact.DevopsError(f"share {self.index}/{self.count}: expected 0 <= index < count")

    def arguments(self) -> list[str]:
        return ["--study-id", self.study_id, "--share", f"{self.index}/{self.count}"]


@dataclasses.dataclass(frozen=True)
class Job:
    """One run on one instance: a Bazel target with one seed, or a study target with its share of the members."""

    target: str
    seed: int | None  # None for a study's share
    run_id: str  # the instance's record (`OUT/vast/<run-id>`); a recipe's run is named so too
    extra_args: tuple[str, ...] = ()
    resume_from: str | None = None  # a previous run of this job, resumed from its newest checkpoint in the store
    share: StudyShare | None = None

    def __post_init__(self):
        if not _TARGET.fullmatch(self.target):
            raise redact.DevopsError(f"target {self.target!r} is not a Bazel label like //experiments/x:y")
        if (self.seed is None) != (self.share is not None) or (self.seed is not None and self.seed < 0):
            raise redact.DevopsError(f"seed {self.seed} must be >= 0 (and None only for a study's share)")
        for run_id in (self.run_id, self.resume_from):
            problem = run_id and status.run_id_problem(run_id)
            if problem:
                raise redact.DevopsError(problem)


@dataclasses.dataclass(frozen=True)
class Bootstrap:
    """What every instance of a launch does: which commits, how results leave, for how long at most."""

    repo: GitPin
    library: GitPin | None = None
    upload_artifacts: bool = False
    max_hours: float = 12.0
    workdir: str = DEFAULT_WORKDIR
    # The instance destroys itself (vast.ai's key for the container, limited to it) once its run has ended
    # and at its deadline: only where its results live in a store, so nothing is lost with its disk.
    self_end: bool = False
    end_grace_s: float = 600.0  # after max_hours: the run's own stop (SIGTERM, checkpoint, mirror drain)
    failed_linger_s: float = 1800.0  # a failed run's instance waits this long, so a watcher reads its error

    def __post_init__(self):
        if self.max_hours <= 0:
            raise redact.DevopsError(f"max_hours={self.max_hours} must be > 0")
        if self.end_grace_s <= 0 or self.failed_linger_s <= 0:
            raise redact.DevopsError(
                f"end_grace_s={self.end_grace_s} and failed_linger_s={self.failed_linger_s} must be > 0"
            )
        if not self.workdir.startswith("/"):
            raise redact.DevopsError(f"workdir {self.workdir!r} must be an absolute path")

    def out_dir(self) -> str:
        """Where results/, artifacts/ and vast/<run-id>/ live on the instance (the copy-back source)."""
        return f"{self.workdir}/out"

    def deadline_s(self) -> float:
        """Seconds from the script's start to the instance's end, whatever the run does."""
        return self.max_hours * 3600 + self.end_grace_s


_TEMPLATE = """\
#!/bin/bash
# rl-harness vast.ai bootstrap, generated by rl/devops/vast/bootstrap.py: do not edit.
# Secrets come from the environment (${git_token_env}, the harness's B2 variables), never from here.
set -euo pipefail
readonly WORK={workdir}
readonly OUT={out_dir}
readonly RUN_ID={run_id}
readonly RECORD="$OUT/vast/$RUN_ID"
mkdir -p "$OUT/results" "$OUT/artifacts" "$RECORD"
log_sink=/dev/stdout
if [ -w /proc/1/fd/1 ]; then log_sink=/proc/1/fd/1; fi  # the container log that `vast logs` reads
# What the build and the run print (a recipe's own prints too) is masked before it reaches the log
# and the container log: every secret this script was given, read from the environment (literal,
# no escapes), as the harness's redaction layer masks them in records.
mask_secrets() {{
  local line_buffered=()
  # mawk (Debian's awk) reads its input in blocks unless told not to: the log would lag, and lose its tail.
  if awk -W version 2>/dev/null | grep -q mawk; then line_buffered=(-W interactive); fi
  awk "${{line_buffered[@]}}" 'BEGIN {{ n = split("{secret_variables}", names, " ")
               for (i = 1; i <= n; i++) if (length(ENVIRON[names[i]]) >= 8) secrets[i] = ENVIRON[names[i]] }}
       {{ for (i in secrets) while ((at = index($0, secrets[i])) > 0)
            $0 = substr($0, 1, at - 1) "[REDACTED]" substr($0, at + length(secrets[i]))
         print; fflush() }}'
}}
exec > >(mask_secrets | tee -a "$RECORD/bootstrap.log" >"$log_sink") 2>&1
tee_pid=$!

phase() {{ echo "{phase_marker} $1 $(date -u +%Y-%m-%dT%H:%M:%SZ)"; }}
# shellcheck disable=SC2317  # finish runs from the EXIT trap
finish() {{
  local code=$?
  set +e
  touch "$WORK/.run-ended"
  if [ -n "${{publish_pid:-}}" ]; then wait "$publish_pid"; fi  # a venv being packed for the next instance
  (cd "$OUT" && find results artifacts -type f -print0 | sort -z | xargs -0 -r sha256sum) >"$RECORD/SHA256SUMS.tmp" \\
    && mv "$RECORD/SHA256SUMS.tmp" "$RECORD/SHA256SUMS"
  echo "{done_marker} exit_code=$code run_id=$RUN_ID"
{end_when_done}  exec >&- 2>&-
  wait "$tee_pid"  # the log file is complete when the script ends
}}
trap finish EXIT
{deadline_timer}
phase install
missing=()
for tool in git rsync zip curl python3.11; do
  command -v "$tool" >/dev/null || missing+=("$tool")
done
command -v bazel >/dev/null || missing+=(bazel)
if [ "${{#missing[@]}}" -gt 0 ]; then
  packages=()
  for tool in "${{missing[@]}}"; do
    case "$tool" in
      bazel) packages+=(bazel-bootstrap) ;;
      python3.11) packages+=(python3.11 python3.11-venv) ;;
      *) packages+=("$tool") ;;
    esac
  done
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq ca-certificates "${{packages[@]}}"
fi

if [ -n "${{{git_token_env}:-}}" ]; then
  cat >"$WORK/git-askpass" <<'ASKPASS'
#!/bin/sh
case "$1" in Username*) echo x-access-token ;; *) echo "${git_token_env}" ;; esac
ASKPASS
  chmod 700 "$WORK/git-askpass"
  export GIT_ASKPASS="$WORK/git-askpass" GIT_TERMINAL_PROMPT=0
fi

checkout() {{  # checkout URL COMMIT DIR: exactly COMMIT, verified
  local url=$1 commit=$2 dir=$3
  rm -rf "$dir"
  git init -q "$dir"
  if git -C "$dir" fetch -q --depth 1 -- "$url" "$commit"; then
    git -C "$dir" checkout -q --detach FETCH_HEAD
  else
    git -C "$dir" fetch -q -- "$url" '+refs/*:refs/remotes/pin/*'
    git -C "$dir" checkout -q --detach "$commit"
  fi
  test "$(git -C "$dir" rev-parse HEAD)" = "$commit"
}}

phase checkout
checkout {repo_url} {repo_commit} "$WORK/repo"
{library_checkout}
# The token was for the checkout only: the build and the run never see it.
unset {git_token_env} GIT_ASKPASS
rm -f "$WORK/git-askpass"
{prebuilt}phase run
cd "$WORK/repo"
set +e
timeout --signal=TERM --kill-after=300 {max_seconds} \\
  bazel run {cuda_lock_flag} {target} -- {run_args}
run_code=$?
set -e
exit "$run_code"
"""


# Self-ending (Bootstrap.self_end). vast.ai gives every container CONTAINER_ID and CONTAINER_API_KEY, a key
# limited to that instance; destroying it ends the whole bill (a stopped instance still bills its disk).
# The key reaches curl through its config on stdin, never its argv.
_END_SELF = """\
end_self() {{  # end_self REASON: destroys this instance (bounded retries)
  local url="${{RLH_VAST_URL:-https://console.vast.ai}}" attempt
  echo "{end_marker} $1"
  for attempt in 1 2 3 4 5; do
    if printf 'header = "Authorization: Bearer %s"\\n' "${{CONTAINER_API_KEY:-}}" \\
        | curl -fsS -K - -X DELETE "$url/api/v0/instances/${{CONTAINER_ID:-none}}/" >/dev/null; then
      return 0
    fi
    sleep $((attempt * 5))
  done
  echo "{end_marker} failed: the instance bills until \\`destroy\\` or \\`reap\\` ends it"
}}
"""
# The deadline holds even if the run, the script or the operator's machine hangs: a process of its own.
_DEADLINE_TIMER = """\
(sleep {deadline_s}; end_self deadline) &
"""
# A run that ended: its instance has nothing left. A failed one waits, so a watcher reads its error first.
_END_WHEN_DONE = """\
  if [ "$code" -eq 0 ]; then end_self completed; else sleep {failed_linger_s}; end_self failed; fi
"""

# The venv (rl/devops/vast/prebuilt.py): unpacked from the store where an instance built it before; else the run's
# build makes it and, once it is complete, it is packed into the store beside the run (niced) for the next instance.
_PREBUILT = """\
phase environment
export RL_PYTHON_VENV_CACHE="$WORK/venvs"
library="${{{library_env}:-$WORK/repo}}"
environment=(--library "$library" --lock "$library/{lock}" --cache-root "$RL_PYTHON_VENV_CACHE" --python python3.11)
prebuilt() {{ PYTHONPATH="$library${{PYTHONPATH:+:$PYTHONPATH}}" "$@"; }}
if [ -f "$library/rl/devops/vast/prebuilt.py" ]; then
  set +e
  prebuilt python3.11 -m rl.devops.vast.prebuilt fetch "${{environment[@]}}"
  fetched=$?
  set -e
  if {{ [ "$fetched" -eq {build_status} ] || [ "$fetched" -eq {replace_status} ]; }} \\
      && venv=$(prebuilt python3.11 -m rl.devops.vast.prebuilt folder "${{environment[@]}}"); then
    replace=()
    if [ "$fetched" -eq {replace_status} ]; then replace=(--replace); fi
    (
      until [ -f "$venv/COMPLETE" ]; do
        if [ -f "$WORK/.run-ended" ]; then exit 0; fi
        sleep 2
      done
      prebuilt nice -n 10 "$venv/bin/python3" -m rl.devops.vast.prebuilt publish "${{environment[@]}}" "${{replace[@]}}"
    ) &
    publish_pid=$!
  fi
else
  echo "{line} $library has no rl/devops/vast/prebuilt.py; building it"
fi
"""


def render(plan: Bootstrap, job: Job) -> str:
    """The onstart script for `job` under `plan` (bash; see the module docstring)."""
    library_checkout = ""
    if plan.library is not None:
        # The documented switch, not --override_repository, which bypasses the template's rule: the rule
        # links the checkout and writes the build.library record itself, so nothing here imitates it.
        library = plan.library
        library_checkout = (
            f'checkout {shlex.quote(library.url)} {shlex.quote(library.commit)} "$WORK/library"\n'
            f'export {LIBRARY_CHECKOUT_ENV}="$WORK/library"\n'
        )
    what = job.share.arguments() if job.share else ["--seed", str(job.seed), "--run-id", job.run_id]
    run_args = [
        *(shlex.quote(argument) for argument in what),
        "--results-dir",
        '"$OUT/results"',
        "--artifacts-dir",
        '"$OUT/artifacts"',
    ]
    if plan.upload_artifacts:
        run_args.append("--upload-artifacts")
    if job.resume_from:
        run_args += ["--resume-from", shlex.quote(job.resume_from)]
    run_args += [shlex.quote(argument) for argument in job.extra_args]
    end_when_done = deadline_timer = ""
    if plan.self_end:
        end_when_done = _END_WHEN_DONE.format(failed_linger_s=int(plan.failed_linger_s))
        deadline_timer = _END_SELF.format(end_marker=END_MARKER) + _DEADLINE_TIMER.format(
            deadline_s=int(plan.deadline_s())
        )
    return _TEMPLATE.format(
        end_when_done=end_when_done,
        deadline_timer=deadline_timer,
        workdir=shlex.quote(plan.workdir),
        out_dir=shlex.quote(plan.out_dir()),
        run_id=shlex.quote(job.run_id),
        phase_marker=PHASE_MARKER,
        done_marker=DONE_MARKER,
        git_token_env=GIT_TOKEN_ENV,
        secret_variables=" ".join((GIT_TOKEN_ENV, *env_vars.SECRET_VARIABLES)),
        repo_url=shlex.quote(plan.repo.url),
        repo_commit=shlex.quote(plan.repo.commit),
        library_checkout=library_checkout,
        cuda_lock_flag=CUDA_LOCK_FLAG,
        max_seconds=int(plan.max_hours * 3600),
        prebuilt=_PREBUILT.format(
            library_env=LIBRARY_CHECKOUT_ENV,
            lock=CUDA_LOCK_FILE,
            build_status=prebuilt.BUILD,
            replace_status=prebuilt.BUILD_AND_REPLACE,
            line=prebuilt.LINE,
        ),
        target=shlex.quote(job.target),
        run_args=" ".join(run_args),
    )


def parse_done(log_text: str) -> int | None:
    """The exit code of the last `RLH_DONE` line in a container log, or None when the run has not ended."""
    codes = re.findall(rf"^{DONE_MARKER} exit_code=(\d+)", log_text, flags=re.MULTILINE)
    return int(codes[-1]) if codes else None


def parse_phase(log_text: str) -> str | None:
    """The last phase the bootstrap announced (install, checkout, run), or None before the first."""
    phases = re.findall(rf"^{PHASE_MARKER} (\S+)", log_text, flags=re.MULTILINE)
    return phases[-1] if phases else None
