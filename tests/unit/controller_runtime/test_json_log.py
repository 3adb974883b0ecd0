"""The controller's log lines: one JSON object each; a logged exception carries its traceback (a loop's
"round failed" line said nothing of why before)."""

import json
import logging

from trainyard.controller.runtime.run_command import JsonFormatter


def record(message: str, exc_info=None) -> logging.LogRecord:
    return logging.LogRecord("trainyard.capacity.loop", logging.ERROR, __file__, 1, message, None, exc_info)


def test_an_exception_is_in_the_line():
    try:
        {}["missing"]
    except KeyError:
        import sys

        line = JsonFormatter().format(record("StallWatcher round failed", sys.exc_info()))
    entry = json.loads(line)
    assert entry["msg"] == "StallWatcher round failed" and entry["level"] == "error"
    assert "KeyError: 'missing'" in entry["error"] and "Traceback" in entry["error"]
    assert "\n" not in line, "one line per entry"


def test_a_json_message_is_merged_and_a_plain_one_kept():
    assert json.loads(JsonFormatter().format(record('{"msg": "reconciled", "trainjob": "ns/a"}')))["trainjob"] == "ns/a"
    entry = json.loads(JsonFormatter().format(record("plain words")))
    assert entry["msg"] == "plain words" and "error" not in entry
