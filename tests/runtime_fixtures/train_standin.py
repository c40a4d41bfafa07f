"""Stand-in training job for the runtime tests (no GPU, standard library only).

Follows the job contract of docs/runtime.md: reads ``DUETTO_ITERATIONS``, ``DUETTO_START_ITERATION``,
``DUETTO_BATCH_SIZE``, ``DUETTO_SUB_BATCH``, ``DUETTO_ACCUMULATION_STEPS`` and ``DUETTO_PROGRESS_FILE``;
each iteration runs ``steps`` micro-steps over ``sub_batch`` samples (so it always processes the
full batch: training semantics unchanged) and appends ``ITERATION UNIX_TIME`` to the progress file.

A micro-step "computes" for ``alpha + beta * sub_batch`` seconds (Eq. 1), slowed by
``1 + slowdown * (others on my GPUs)`` when ``--contention-dir`` is given: jobs register per GPU UUID
there, which emulates interference between co-located jobs.

Options for the tests:
  --alpha S --beta S          micro-step time model (default 0.01, 0)
  --instant                   no sleeping at all (benchmark)
  --sub-batch N --steps N     must agree with the environment (tests argument templating)
  --fail-at K                 exit 3 after iteration K ...
  --fail-attempts M           ... but only while DUETTO_ATTEMPT <= M (default: always)
  --ledger PATH               append JSON events: start, done, double-start
  --lock-dir DIR              hold DIR/<job>.rank<r>.lock; a second concurrent instance records "double" and exits 4
  --contention-dir DIR --slowdown X
  --escape                    start a helper process in a new session (outside the job's process group)
                              that sleeps for an hour; its pid goes to the ledger ("escapee")
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import signal
import sys
import time


def ledger(path: str | None, event: str, **fields: object) -> None:
    if not path:
        return
    record = {"event": event, "time": time.time(), "pid": os.getpid(), **fields}
    line = json.dumps(record) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, line.encode())  # one write with O_APPEND: lines never interleave
    finally:
        os.close(fd)


def others_on_my_gpus(contention_dir: str, uuids: list[str]) -> int:
    worst = 0
    for uuid in uuids:
        folder = os.path.join(contention_dir, uuid)
        count = 0
        try:
            names = os.listdir(folder)
        except FileNotFoundError:
            continue
        for name in names:
            if not name.isdigit() or int(name) == os.getpid():
                continue
            try:
                os.kill(int(name), 0)
                count += 1
            except ProcessLookupError:
                continue
            except PermissionError:
                count += 1
        worst = max(worst, count)
    return worst


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--alpha", type=float, default=0.01)
    parser.add_argument("--beta", type=float, default=0.0)
    parser.add_argument("--instant", action="store_true")
    parser.add_argument("--sub-batch", type=int)
    parser.add_argument("--steps", type=int)
    parser.add_argument("--fail-at", type=int)
    parser.add_argument("--fail-attempts", type=int)
    parser.add_argument("--ledger")
    parser.add_argument("--lock-dir")
    parser.add_argument("--contention-dir")
    parser.add_argument("--slowdown", type=float, default=0.0)
    parser.add_argument("--escape", action="store_true")
    args = parser.parse_args()

    env = os.environ
    job = env["DUETTO_JOB_ID"]
    launch = env.get("DUETTO_LAUNCH_ID", "")
    attempt = int(env.get("DUETTO_ATTEMPT", "1"))
    total = int(env["DUETTO_ITERATIONS"])
    done = int(env.get("DUETTO_START_ITERATION", "0"))
    batch = int(env["DUETTO_BATCH_SIZE"])
    sub_batch = int(env["DUETTO_SUB_BATCH"])
    steps = int(env["DUETTO_ACCUMULATION_STEPS"])
    progress_file = env["DUETTO_PROGRESS_FILE"]
    uuids = [u for u in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if u]

    if sub_batch * steps != batch:
        sys.stderr.write(f"accumulation breaks the batch: {sub_batch} x {steps} != {batch}\n")
        return 5
    if (args.sub_batch is not None and args.sub_batch != sub_batch) or (args.steps is not None and args.steps != steps):
        sys.stderr.write("templated arguments disagree with the environment\n")
        return 6

    lock_handle = None
    if args.lock_dir:
        rank = env.get("DUETTO_NODE_RANK", "0")  # the processes of one gang hold one lock each
        lock_handle = open(os.path.join(args.lock_dir, f"{job}.rank{rank}.lock"), "w")  # noqa: SIM115
        try:
            fcntl.flock(lock_handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            ledger(args.ledger, "double", job=job, launch=launch)
            return 4

    registration = None
    if args.contention_dir:
        for uuid in uuids:
            os.makedirs(os.path.join(args.contention_dir, uuid), exist_ok=True)
            registration = os.path.join(args.contention_dir, uuid, str(os.getpid()))
            open(registration, "w").close()

    def on_term(signum: int, frame: object) -> None:
        ledger(args.ledger, "stopped", job=job, launch=launch, iteration=done)
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, on_term)
    if args.escape:
        import subprocess

        helper = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(3600)"],
            start_new_session=True,  # like a daemonising data loader: a group kill of the job misses it
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        ledger(args.ledger, "escapee", job=job, launch=launch, escapee=helper.pid)
    ledger(
        args.ledger,
        "start",
        job=job,
        launch=launch,
        attempt=attempt,
        start_iteration=done,
        sub_batch=sub_batch,
        steps=steps,
        cuda_visible_devices=env.get("CUDA_VISIBLE_DEVICES"),
        mps_pipe=env.get("CUDA_MPS_PIPE_DIRECTORY"),
        mps_log=env.get("CUDA_MPS_LOG_DIRECTORY"),
        thread_percentage=env.get("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"),
        node_rank=env.get("DUETTO_NODE_RANK"),
        argv=sys.argv[1:],
    )
    print(
        f"stand-in {job} launch {launch}: iterations {done}..{total}, {steps} x {sub_batch} samples",
        flush=True,
    )
    samples = 0
    first = done
    with open(progress_file, "a", encoding="utf-8") as progress:
        progress.write(f"{done} {time.time():.6f}\n")
        progress.flush()
        while done < total:
            for _ in range(steps):
                if not args.instant:
                    seconds = args.alpha + args.beta * sub_batch
                    if args.contention_dir:
                        seconds *= 1.0 + args.slowdown * others_on_my_gpus(args.contention_dir, uuids)
                    time.sleep(seconds)
                samples += sub_batch
            done += 1
            progress.write(f"{done} {time.time():.6f}\n")
            progress.flush()
            if (
                args.fail_at is not None
                and done >= args.fail_at
                and (args.fail_attempts is None or attempt <= args.fail_attempts)
            ):
                ledger(args.ledger, "crash", job=job, launch=launch, iteration=done)
                return 3
    if registration:
        os.unlink(registration)
    ledger(
        args.ledger,
        "done",
        job=job,
        launch=launch,
        node_rank=env.get("DUETTO_NODE_RANK"),
        iterations=done,
        samples_per_iteration=samples // max(1, done - first),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
