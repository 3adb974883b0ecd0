"""An image build says which step it is at: each command run into the build's log is announced, with the time so
far and the time left from the last build of that image."""

import sys

import pytest

from trainyard.images.logrun import reporting_steps, run_to_log, step_words


@pytest.mark.parametrize("argv, elapsed, typical, words", [
    (["/usr/sbin/debootstrap", "--variant=minbase", "bookworm", "/tmp/root"], 0.0, None,
     "image training: step 1, debootstrap bookworm (0 s so far)"),
    (["/usr/bin/python3", "-m", "pip", "install", "--no-index", "torch"], 45.0, 240.0,
     "image training: step 1, pip install (45 s so far, about 3 min left)"),
    (["gcc", "-Os", "-o", "/x/pause", "/y/pause.c"], 1.0, 5.0, "image training: step 1, gcc (1 s so far, about 4 s left)"),
    (["chroot", "/tmp/root", "apt-get"], 500.0, 240.0, "image training: step 1, chroot apt-get (500 s so far, about 0 s left)"),
])
def test_step_words_name_the_command_and_the_time(argv, elapsed, typical, words):
    assert step_words("image training", 1, argv, elapsed, typical) == words


def test_each_command_of_a_build_is_announced_while_reporting(tmp_path):
    said: list[str] = []
    log = tmp_path / "build.log"
    with reporting_steps("image pause", said.append, typical_s=60):
        run_to_log([sys.executable, "-c", "print('one')"], log)
        run_to_log([sys.executable, "-c", "print('two')"], log)
    run_to_log([sys.executable, "-c", "print('after')"], log)  # no longer reported
    assert len(said) == 2
    assert said[0].startswith("image pause: step 1, python") and said[1].startswith("image pause: step 2, python")
    assert all(line.endswith("s so far, about 60 s left)") for line in said), said
    assert "one" in log.read_text() and "after" in log.read_text()
