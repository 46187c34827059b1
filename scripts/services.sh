#!/usr/bin/env bash
# Start what the sandbox tests need on a fresh Debian machine (as root); idempotent and fast
# when everything is already there. The test runner calls it before pytest.
#
#   - the Docker engine (docker.io), started without iptables or a bridge: the sandbox's
#     containers use --network none, and this machine has no registry to pull from;
#   - the docker backend's base image, imported locally by `rlvr sandbox build-image`.
#
#   - libseccomp's Python bindings for the system interpreter (python3-seccomp): both backends'
#     agents build their syscall filter with them and refuse to run programs without them.
#
# The process backend builds its namespaces itself (as root).
# A missing engine is reported, not fatal: the Docker tests then skip, saying why.
set -uo pipefail

log() { echo "services.sh: $*" >&2; }

engine_up() { docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }

if ! /usr/bin/python3 -c "import seccomp" >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get install -y -q python3-seccomp >/dev/null 2>&1; then
        apt-get update -q >/dev/null 2>&1
        apt-get install -y -q python3-seccomp >/dev/null 2>&1 || log "could not install python3-seccomp"
    fi
fi

if ! command -v dockerd >/dev/null 2>&1 || ! command -v docker >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get install -y -q docker.io >/dev/null 2>&1; then
        apt-get update -q >/dev/null 2>&1
        apt-get install -y -q docker.io >/dev/null 2>&1 || log "could not install docker.io"
    fi
fi

if command -v dockerd >/dev/null 2>&1 && ! engine_up; then
    nohup dockerd --iptables=false --bridge=none >/var/log/rlvr-dockerd.log 2>&1 &
    for _ in $(seq 120); do
        engine_up && break
        sleep 0.25
    done
    engine_up || log "dockerd did not come up; see /var/log/rlvr-dockerd.log"
fi

# The image: through the first interpreter that has rlvr installed ($PYTHON wins). The tests
# build it too when it is missing, so a miss here only costs them a second.
if engine_up; then
    built=""
    for py in ${PYTHON:-} "$(command -v rlvr >/dev/null 2>&1 && head -1 "$(command -v rlvr)" | sed 's/^#!//')" python3 python; do
        [ -n "$py" ] || continue
        if "$py" -c "import rlvr.sandbox.docker" >/dev/null 2>&1; then
            "$py" -m rlvr.cli sandbox build-image >/dev/null && built=1 && break
        fi
    done
    [ -n "$built" ] || log "could not build the sandbox image (set PYTHON to the interpreter with rlvr)"
fi
exit 0
