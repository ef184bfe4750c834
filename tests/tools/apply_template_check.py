#!/usr/bin/env python3
"""apply_template_check.py SOCKET NAME.json — POSTs every case of a chat
template reference (../shared/reference/templates, see its README) to
/apply-template of an `llmchat serve --chat-template-file NAME.jinja` on the
Unix socket SOCKET and compares the answer's prompt with the expected one byte
for byte. Cases that show the render date expect today's date instead (the
server renders with the current time). Prints one line: "ok NAME (N cases)"
or "FAIL NAME" followed by where each failing case differs; exits 0 or 1."""
import datetime
import http.client
import json
import socket
import sys


class UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=20)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(20)
        self.sock.connect(self.path)


DATE_FORMATS = ("%Y-%m-%d", "%B %d, %Y", "%d %b %Y", "%b %d %Y")


def today_instead(text, date):
    then = datetime.datetime.strptime(date, "%Y-%m-%d")
    now = datetime.datetime.now()
    for f in DATE_FORMATS:
        text = text.replace(then.strftime(f), now.strftime(f))
    return text


def main():
    sock, ref_path = sys.argv[1], sys.argv[2]
    with open(ref_path, encoding="utf-8") as f:
        ref = json.load(f)
    name = ref["template"]
    problems = []
    for case in ref["cases"]:
        body = {"messages": case["messages"], "add_generation_prompt": case["add_generation_prompt"]}
        if "tools" in case:
            body["tools"] = case["tools"]
        want = case["prompt"]
        if "date" in case:
            want = today_instead(want, case["date"])
        conn = UnixHTTP(sock)
        conn.request("POST", "/apply-template", body=json.dumps(body).encode(),
                     headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        raw = resp.read()
        conn.close()
        if resp.status != 200:
            problems.append("%s: status %d: %s" % (case["name"], resp.status, raw[:300]))
            continue
        got = json.loads(raw).get("prompt")
        if got != want:
            k = 0
            while k < min(len(got), len(want)) and got[k] == want[k]:
                k += 1
            problems.append("%s: differs at char %d: want %r got %r" % (case["name"], k, want[k:k + 40], got[k:k + 40]))
    if problems:
        print("FAIL %s" % name)
        for p in problems:
            print("     " + p)
        return 1
    print("ok   %s (%d cases)" % (name, len(ref["cases"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
