"""Container images made on this machine, for a node that can pull from no registry.

An image here is a docker-archive tarball (``manifest.json``, a config, one
layer tar per layer) that ``ctr images import`` loads into containerd. Two are
built from parts this machine has:

- **pause**: the sandbox image every Pod needs, a static C program that waits
  on ``pause()`` and exits on SIGINT/SIGTERM (``gcc -static``).
- **probe**: Debian's static busybox and a short script, run as uid 1000 on a
  read-only root. Its first generation (``"generation":1,`` in the launch
  record the operator mounts) ends as ``PROBE_MODE`` says: ``oom`` allocates
  far past any small memory limit, so the kernel kills it; ``exit`` exits 3;
  ``wait`` runs on. Any later generation waits until it is stopped. It stands
  in for the worker image where a test is about how a Pod dies, not about the
  worker (those use the real worker image).

Each tarball is cached under the images folder by a hash of its inputs. The project's own images
(operator and worker, from ``deploy/Dockerfile.*``) are ``scripts/images.sh``'s:
:func:`project_images` runs it (a no-op when its cache holds the current inputs).
"""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import subprocess
import tarfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

PAUSE_REF = "agentihooks.local/pause:1"
PROBE_REF = "agentihooks.local/probe:1"
REDIS_REPOSITORY = "agentihooks.local/redis"
PAUSE_C = r"""
#include <signal.h>
#include <unistd.h>
static void stop(int sig) { (void)sig; _exit(0); }
int main(void) {
  signal(SIGINT, stop);
  signal(SIGTERM, stop);
  for (;;) pause();
}
"""
PROBE_SH = """\
# PROBE_MODE (the Pod template's env) says how generation 1 ends; later generations wait until stopped.
# oom: grow past the memory limit (the kernel kills it); exit: exit 3; wait: run until stopped.
# On cgroup v1 the kernel kills only dd; the shell lives on a moment, as a worker whose harness was
# killed does (its final capture), so containerd's OOM event is in before the container's exit: an
# exit right after dd's raced it, and the kubelet then reported "Error", not "OOMKilled".
if /bin/busybox grep -q '"generation":1,' "$AGENTIHOOKS_LAUNCH_RECORD"; then
  case "${PROBE_MODE:-oom}" in
    oom) /bin/busybox dd if=/dev/zero of=/dev/null bs=512M count=1; /bin/busybox sleep 2; exit 4 ;;
    exit) exit 3 ;;
  esac
fi
exec /bin/busybox sleep 100000
"""
BUSYBOX = Path("/bin/busybox")


def _layer(files: dict[str, tuple[bytes, int]], links: dict[str, str] | None = None) -> bytes:
    """A layer tar holding ``path -> (content, mode)`` and symbolic ``links`` (``path -> target``);
    folders made as needed, all owned by root."""
    out = io.BytesIO()
    links = links or {}
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        folders = sorted({str(parent) for p in [*files, *links] for parent in Path(p).parents} - {"."})
        for folder in folders:
            info = tarfile.TarInfo(folder)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
        for path, (content, mode) in sorted(files.items()):
            info = tarfile.TarInfo(path)
            info.size, info.mode = len(content), mode
            tar.addfile(info, io.BytesIO(content))
        for path, target in sorted(links.items()):
            info = tarfile.TarInfo(path)
            info.type, info.linkname, info.mode = tarfile.SYMTYPE, target, 0o777
            tar.addfile(info)
    return out.getvalue()


def docker_archive(ref: str, layer: bytes, config: dict[str, object]) -> bytes:
    """One-layer docker-archive tarball of image ``ref`` with container ``config``."""
    diff = "sha256:" + hashlib.sha256(layer).hexdigest()
    image = {
        "architecture": "amd64",
        "os": "linux",
        "config": config,
        "rootfs": {"type": "layers", "diff_ids": [diff]},
        "history": [{"created_by": "agentihooks tests/testsupport/images.py"}],
    }
    raw = json.dumps(image, sort_keys=True).encode()
    config_name = hashlib.sha256(raw).hexdigest() + ".json"
    layer_name = diff.removeprefix("sha256:") + "/layer.tar"
    manifest = json.dumps([{"Config": config_name, "RepoTags": [ref], "Layers": [layer_name]}]).encode()
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name, content in ((config_name, raw), (layer_name, layer), ("manifest.json", manifest)):
            info = tarfile.TarInfo(name)
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
    return out.getvalue()


def _cached(folder: Path, name: str, inputs: bytes) -> Path:
    return folder / f"{name}-{hashlib.sha256(inputs).hexdigest()[:16]}.tar"


def pause_image(folder: Path) -> Path:
    """The pause image tarball, built once per source (needs gcc with a static libc)."""
    folder.mkdir(parents=True, exist_ok=True)
    target = _cached(folder, "pause", PAUSE_C.encode())
    if target.exists():
        return target
    gcc = shutil.which("gcc")
    if gcc is None:
        raise RuntimeError("building the pause image needs gcc (apt-get install gcc libc6-dev)")
    source, binary = folder / "pause.c", folder / "pause"
    source.write_text(PAUSE_C)
    subprocess.run([gcc, "-static", "-Os", "-o", str(binary), str(source)], check=True, capture_output=True)
    layer = _layer({"pause": (binary.read_bytes(), 0o755)})
    config = {"Entrypoint": ["/pause"], "User": "65535:65535"}
    part = target.with_suffix(".part")
    part.write_bytes(docker_archive(PAUSE_REF, layer, config))
    part.rename(target)
    return target


def probe_image(folder: Path) -> Path:
    """The probe image tarball (Debian's static busybox, see the module)."""
    if not BUSYBOX.exists():
        raise RuntimeError("the probe image needs Debian's static busybox (apt-get install busybox-static)")
    folder.mkdir(parents=True, exist_ok=True)
    busybox = BUSYBOX.read_bytes()
    if b"/lib64/ld-linux" in busybox[:4096] or b"/lib/ld-linux" in busybox[:4096]:
        raise RuntimeError(f"{BUSYBOX} is linked dynamically: the probe image needs busybox-static")
    target = _cached(folder, "probe", busybox + PROBE_SH.encode())
    if target.exists():
        return target
    files = {"bin/busybox": (busybox, 0o755), "probe.sh": (PROBE_SH.encode(), 0o644)}
    layer = _layer(files)
    config = {"Entrypoint": ["/bin/busybox", "sh", "/probe.sh"], "User": "1000:1000", "WorkingDir": "/"}
    part = target.with_suffix(".part")
    part.write_bytes(docker_archive(PROBE_REF, layer, config))
    part.rename(target)
    return target


def _shared_libraries(binary: Path) -> list[Path]:
    """The files ``ldd`` says ``binary`` loads (its dynamic loader included)."""
    res = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, check=True)
    found = []
    for line in res.stdout.splitlines():
        words = line.split()
        path = words[2] if "=>" in words and len(words) > 2 else words[0] if words else ""
        if path.startswith("/"):
            found.append(Path(path))
    return found


def redis_image(folder: Path) -> tuple[str, Path]:
    """``(ref, tarball)`` of the Redis image made from this machine's redis-server (see the module)."""
    binaries = {"redis-server": shutil.which("redis-server"), "redis-cli": shutil.which("redis-cli")}
    if None in binaries.values() or not BUSYBOX.exists():
        raise RuntimeError(
            "the Redis image needs redis-server, redis-cli and busybox-static (apt-get install)"
        )
    files: dict[str, tuple[bytes, int]] = {"bin/busybox": (BUSYBOX.read_bytes(), 0o755)}
    for name, where in binaries.items():
        real = Path(where or "").resolve()
        files[f"usr/bin/{name}"] = (real.read_bytes(), 0o755)
        for lib in _shared_libraries(real):
            files[str(lib).lstrip("/")] = (lib.resolve().read_bytes(), 0o755)  # where ldd found it
    links = {"bin/sh": "busybox", "bin/grep": "busybox"}
    digest = hashlib.sha256()
    for path, (content, _) in sorted(files.items()):
        digest.update(path.encode() + hashlib.sha256(content).digest())
    version = subprocess.run(
        [binaries["redis-server"] or "", "--version"], capture_output=True, text=True, check=False
    ).stdout
    tag = version.split("v=")[1].split()[0] if "v=" in version else "local"
    ref = f"{REDIS_REPOSITORY}:{tag}-{digest.hexdigest()[:12]}"
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"redis-{digest.hexdigest()[:16]}.tar"
    if not target.exists():
        config = {"Env": ["PATH=/usr/bin:/bin"], "Cmd": ["redis-server"], "User": "999:999"}
        part = target.with_suffix(".part")
        part.write_bytes(docker_archive(ref, _layer(files, links), config))
        part.rename(target)
    return ref, target


def project_images() -> dict[str, tuple[str, Path]]:
    """``{"operator": (ref, tarball), "worker": (ref, tarball)}``, built by ``scripts/images.sh`` when
    its cache lacks them (buildah, mmdebstrap; a few minutes cold). A failed build names its step."""
    res = subprocess.run(
        [str(REPO / "scripts" / "images.sh")], capture_output=True, text=True, check=False, timeout=1800
    )
    if res.returncode != 0:
        raise RuntimeError(f"scripts/images.sh failed: {res.stderr.strip()[-2000:]}")
    found: dict[str, tuple[str, Path]] = {}
    for line in res.stdout.splitlines():
        ref, _, tarball = line.partition(" ")
        name = ref.rsplit("/", 1)[-1].split(":", 1)[0].removeprefix("agentihooks-")
        found[name] = (ref, Path(tarball))
    if set(found) != {"operator", "worker"}:
        raise RuntimeError(f"scripts/images.sh printed {res.stdout!r}, not the two images")
    return found


#: Where the worker image installs Claude Code (``npm install -g``); ``/usr/local/bin/claude`` links here.
CLAUDE_IN_IMAGE = "usr/local/lib/node_modules/@anthropic-ai/claude-code"


def worker_with_claude(worker_tar: Path, ref: str, package: Path, folder: Path) -> Path:
    """The worker image of ``worker_tar`` with the Claude Code package at ``package`` (a folder with
    its package.json) in place of the one it installs, under the same ``ref``: what a tag pushed again
    with another Claude Code is. One layer is added: the package folder, opaque over the old one.
    Cached by the worker archive and the package version; an older one is deleted."""
    version = json.loads((package / "package.json").read_text())["version"]
    key = hashlib.sha256(f"{worker_tar.name} {version} {ref} bin-link".encode()).hexdigest()[:16]
    target = folder / f"worker-claude{version}-{key}.tar"
    if target.exists():
        return target
    layer = _package_layer(package)
    diff = "sha256:" + hashlib.sha256(layer).hexdigest()
    with tarfile.open(worker_tar) as old:
        [entry] = json.loads(old.extractfile("manifest.json").read())  # type: ignore[union-attr]
        config = json.loads(old.extractfile(entry["Config"]).read())  # type: ignore[union-attr]
        config["rootfs"]["diff_ids"].append(diff)
        config.setdefault("history", []).append(
            {"created_by": f"Claude Code {version} in place of the image's own ({CLAUDE_IN_IMAGE})"}
        )
        raw = json.dumps(config).encode()
        config_name = hashlib.sha256(raw).hexdigest() + ".json"
        layer_name = diff.split(":", 1)[1] + ".tar"
        manifest = [{"Config": config_name, "RepoTags": [ref], "Layers": [*entry["Layers"], layer_name]}]
        part = target.with_suffix(".part")
        with tarfile.open(part, "w") as new:
            for member in old:
                if member.name in ("manifest.json", entry["Config"]) or not member.isfile():
                    continue
                new.addfile(member, old.extractfile(member))
            for name, content in ((layer_name, layer), (config_name, raw)):
                info = tarfile.TarInfo(name)
                info.size = len(content)
                new.addfile(info, io.BytesIO(content))
            data = json.dumps(manifest).encode()
            info = tarfile.TarInfo("manifest.json")
            info.size = len(data)
            new.addfile(info, io.BytesIO(data))
    for stale in folder.glob(f"worker-claude{version}-*.tar"):
        stale.unlink()
    part.rename(target)
    return target


def _package_layer(package: Path) -> bytes:
    """A layer holding ``package`` at :data:`CLAUDE_IN_IMAGE`, hiding what was there (opaque whiteout),
    and ``/usr/local/bin/claude`` linked to its own executable, as ``npm install -g`` leaves them
    (2.1 ships ``bin/claude.exe``, 2.0 ``cli.js``)."""
    out = io.BytesIO()
    executable = json.loads((package / "package.json").read_text())["bin"]["claude"]
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for folder in ("usr", "usr/local", "usr/local/bin"):
            info = tarfile.TarInfo(folder)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
        link = tarfile.TarInfo("usr/local/bin/claude")
        link.type, link.linkname = (
            tarfile.SYMTYPE,
            f"../lib/node_modules/@anthropic-ai/claude-code/{executable}",
        )
        tar.addfile(link)
        parts = Path(CLAUDE_IN_IMAGE).parts
        for i in range(3, len(parts) + 1):  # usr, usr/local: above
            info = tarfile.TarInfo("/".join(parts[:i]))
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
        opaque = tarfile.TarInfo(f"{CLAUDE_IN_IMAGE}/.wh..wh..opq")
        tar.addfile(opaque, io.BytesIO(b""))
        for path in sorted(package.rglob("*")):
            rel = f"{CLAUDE_IN_IMAGE}/{path.relative_to(package).as_posix()}"
            info = tar.gettarinfo(str(path), arcname=rel)
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            info.mode = (info.mode & 0o755) | 0o444 if not info.isdir() else 0o755
            if info.isfile():
                with path.open("rb") as f:
                    tar.addfile(info, f)
            else:
                tar.addfile(info)
    return out.getvalue()
