"""Render a config file from a template, then exec the server.

    render.py [--set NAME=VALUE]... TEMPLATE OUTPUT -- COMMAND [ARG]...

${NAME} in TEMPLATE is replaced by NAME's --set value, or else by the
environment variable NAME; an unknown NAME is an error. OUTPUT is written
atomically (a temporary file, then rename). Then render.py *execs* COMMAND:
same pid, so LISTEN_PID, which prebind set to this pid, stays right for the
server, and the socket (fd 3) is passed on untouched.

With prebind, the values come from its templates:

    prebind -E PORT={port} -E BASE_URL={url} -- \\
        python3 render.py app.conf.in app.conf -- python3 server.py --config app.conf
    prebind --subst -- \\
        python3 render.py --set PORT={port} --set BASE_URL={url} app.conf.in app.conf -- \\
        python3 server.py --config app.conf
"""

import argparse
import os
import string
import sys
import tempfile


def main():
    argv = sys.argv[1:]
    if "--" not in argv:
        sys.exit("render.py: usage: render.py [--set NAME=VALUE]... TEMPLATE OUTPUT -- COMMAND [ARG]...")
    split = argv.index("--")
    parser = argparse.ArgumentParser(prog="render.py")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("template")
    parser.add_argument("output")
    args = parser.parse_args(argv[:split])
    command = argv[split + 1:]
    if not command:
        parser.error("no COMMAND after --")

    values = dict(os.environ)
    for item in args.set:
        name, sep, value = item.partition("=")
        if not sep:
            parser.error(f"--set '{item}': expected NAME=VALUE")
        values[name] = value
    with open(args.template) as f:
        try:
            text = string.Template(f.read()).substitute(values)
        except (KeyError, ValueError) as e:
            sys.exit(f"render.py: {args.template}: no value for {e}")

    directory = os.path.dirname(os.path.abspath(args.output))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".render-")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, args.output)

    # exec, not subprocess: the server must keep this pid (LISTEN_PID).
    os.execvp(command[0], command)


if __name__ == "__main__":
    main()
