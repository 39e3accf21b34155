"""The benchmark cassettes (benches/run.sh, benches/compare.sh): a 2-turn lead run, 12
one-turn tasks of 1 s latency, fan-outs of instant tasks (200 to 100,000), and one grep and
one glob and one ls call for the search benchmark. Usage: cassettes.py DIR"""
import json, sys, os
d = sys.argv[1]
def task(i): return {"name": "task", "arguments": {"description": f"t{i}", "prompt": f"do {i}", "subagent_type": "general-purpose"}}
json.dump({"version": 1, "lead": [{"tool_calls": [{"name": "ls"}], "usage": {"input_tokens": 10, "output_tokens": 2}},
                                  {"text": "done", "usage": {"input_tokens": 12, "output_tokens": 3}}]}, open(f"{d}/two_turns.json", "w"))
json.dump({"version": 1, "lead": [{"tool_calls": [task(i) for i in range(12)]}, {"text": "ok"}],
           "default_task": [{"text": "r", "delay_ms": 1000}]}, open(f"{d}/fan12.json", "w"))
for n in (200, 1000, 10000, 50000, 100000):
    json.dump({"version": 1, "lead": [{"tool_calls": [task(i) for i in range(n)]}, {"text": "ok"}],
               "default_task": [{"text": "r", "usage": {"input_tokens": 1, "output_tokens": 1}}]}, open(f"{d}/fan{n}.json", "w"))
# One search or listing call on the generated tree (benches/run.sh), then an answer.
for name, call in (("grep", {"name": "grep", "arguments": {"pattern": "needle_4d3f9a", "case_sensitive": True}}),
                   ("glob", {"name": "glob", "arguments": {"pattern": "**/*_77.txt"}}),
                   ("ls", {"name": "ls", "arguments": {}})):
    json.dump({"version": 1, "lead": [{"tool_calls": [call]}, {"text": "ok"}]}, open(f"{d}/{name}.json", "w"))
