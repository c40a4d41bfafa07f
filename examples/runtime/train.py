"""A training job that follows duetto's job contract (docs/runtime.md), standard library only.

A real job would build its model and data loader where the comments say; this one sleeps for the time an
iteration would take, so the example runs anywhere (no GPU, no framework). What it shows:

* the runtime chooses the accumulation steps ``s`` and the micro-batch ``b = B / s`` (Castor's knob for
  fitting memory when jobs share a GPU); the job feeds ``b`` samples per forward/backward pass and
  steps the optimizer every ``s`` passes, so each optimizer step still sees the user's batch ``B``;
* it resumes from ``DUETTO_START_ITERATION`` (a job may be stopped, moved and restarted);
* it appends ``ITERATION UNIX_TIME`` to ``DUETTO_PROGRESS_FILE`` after every optimizer step (the
  runtime's view of its progress);
* it checkpoints and exits on SIGTERM (the runtime stops jobs with SIGTERM, then SIGKILL).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--micro-batch", type=int, required=True, help="b: samples per forward/backward pass")
    parser.add_argument("--accum", type=int, required=True, help="s: micro-batches per optimizer step")
    args = parser.parse_args()

    batch = int(os.environ["DUETTO_BATCH_SIZE"])
    iterations = int(os.environ["DUETTO_ITERATIONS"])
    start = int(os.environ.get("DUETTO_START_ITERATION", "0"))
    progress = os.environ["DUETTO_PROGRESS_FILE"]
    if args.micro_batch * args.accum != batch:  # the contract: b · s = B, so training is unchanged
        print(f"micro-batch {args.micro_batch} x {args.accum} steps != batch {batch}", file=sys.stderr)
        return 2

    stopping = False

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    model = os.environ.get("EXAMPLE_MODEL", "model")
    print(
        f"{model}: GPUs {os.environ.get('CUDA_VISIBLE_DEVICES', '')}, iterations {start}..{iterations}, "
        f"micro-batch {args.micro_batch} x {args.accum}",
        flush=True,
    )
    # model = build_model(); optimizer = ...; load the checkpoint of iteration `start` if there is one
    for iteration in range(start + 1, iterations + 1):
        for _ in range(args.accum):
            time.sleep(0.002 + 0.00005 * args.micro_batch)  # forward + backward on `micro_batch` samples
        # optimizer.step(); optimizer.zero_grad()
        with open(progress, "a", encoding="utf-8") as handle:
            handle.write(f"{iteration} {time.time()}\n")
        if stopping:
            # save_checkpoint(iteration): the next launch starts from DUETTO_START_ITERATION
            print(f"{model}: stopped after iteration {iteration}", flush=True)
            return 128 + signal.SIGTERM
    print(f"{model}: done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
