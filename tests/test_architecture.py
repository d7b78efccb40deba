"""The package's shape, checked: one import namespace, the capture format on its own, dependencies
pointing one way (capture <- engines <- proxy, mitm <- replay <- analysis <- CLI), no cycles."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: Each module's layer; a module may import only from its own layer or those below.
LAYERS = [
    ("infertap", "infertap.errors", "infertap.version", "infertap.quantiles", "infertap.apis"),
    ("infertap.capture",),
    ("infertap.engines", "infertap.telemetry"),
    ("infertap.proxy", "infertap.mitm"),
    ("infertap.replay",),
    ("infertap.analysis",),
    (
        "infertap.cli",
        "infertap.cli_analysis",
        "infertap.cli_compare",
        "infertap.cli_mitm",
        "infertap.cli_replay",
        "infertap.cli_sweep",
        "infertap.cli_claim",
    ),
    ("infertap.options", "infertap.demo", "infertap.launch", "infertap.__main__"),
]
LAYERS[6] = LAYERS[6] + LAYERS.pop(7)  # the CLI and what only it (and tests) use: one layer


def _sources() -> dict[str, Path]:
    """Module name -> file, laid out as setuptools installs them (pyproject's package-dir)."""
    mapping = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    roots = {"infertap": ROOT / "infertap", **{name: ROOT / folder for name, folder in mapping.items()}}
    modules = {}
    for package, folder in roots.items():
        for path in folder.rglob("*.py"):
            parts = path.relative_to(folder).with_suffix("").parts
            name = ".".join((package, *parts))
            modules[name.removesuffix(".__init__")] = path
    return modules


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The infertap modules ``name`` imports, anywhere in the file (lazy imports count too)."""
    is_package = path.name == "__init__.py"
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".") if is_package else name.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            targets = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        else:
            continue
        found.update(t for t in targets if t in known and t != name)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _sources()
    return {name: _imports(name, path, set(modules)) for name, path in modules.items()}


def _layer(module: str) -> int:
    best = (-1, -1)
    for rank, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best[1]:
                best = (rank, len(prefix))
    assert best[0] >= 0, f"{module} is in no layer: add it to LAYERS"
    return best[0]


def test_dependencies_point_one_way():
    upward = [
        f"{module} (layer {_layer(module)}) imports {target} (layer {_layer(target)})"
        for module, targets in sorted(_graph().items())
        for target in sorted(targets)
        if _layer(target) > _layer(module)
    ]
    assert upward == []


def test_no_import_cycles():
    graph = _graph()
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                cycles.append([*path[path.index(target) :], target])
            elif target not in state:
                visit(target, [*path, target])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    # A package importing its own modules (an __init__ re-exporting them) is not a cycle; a module
    # importing its package's __init__ back would be.
    assert cycles == []


def test_the_graph_sees_the_mapped_packages():
    graph = _graph()  # a check that can't fail on an empty graph is no check
    assert {"infertap.proxy.app", "infertap.replay.runner", "infertap.analysis.store", "infertap.capture.reader"} <= set(graph)
    assert "infertap.capture.writer" in graph["infertap.proxy.app"]


def _run(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=60)


def test_the_capture_format_imports_nothing_of_the_rest(tmp_path):
    heavy = ("infertap.proxy", "infertap.replay", "infertap.analysis", "infertap.engines", "infertap.mitm")
    heavy += ("infertap.cli", "starlette", "uvicorn", "duckdb", "pyarrow", "mitmproxy", "httpx")
    done = _run(
        "import sys, infertap.capture\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {{'starlette','uvicorn','duckdb','pyarrow','mitmproxy','httpx'}} "
        f"or any(m == h or m.startswith(h + '.') for h in {heavy!r})))",
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("name", ["proxy", "replay", "analysis"])
def test_no_top_level_package_but_infertap_is_installed(tmp_path, name):
    done = _run(f"import {name}", tmp_path)
    assert done.returncode != 0 and f"No module named '{name}'" in done.stderr
    done = _run(f"import infertap.{name}; print(infertap.{name}.__name__)", tmp_path)
    assert done.returncode == 0 and done.stdout.strip() == f"infertap.{name}", done.stderr


def test_the_public_api_loads_each_name_on_use(tmp_path):
    done = _run(
        "import sys, infertap\n"
        "assert 'infertap.capture' not in sys.modules and 'infertap.analysis' not in sys.modules\n"
        "reader = infertap.CaptureReader\n"
        "assert 'infertap.capture' in sys.modules and 'infertap.analysis' not in sys.modules, sorted(sys.modules)\n"
        "missing = [n for n in infertap.__all__ if getattr(infertap, n, None) is None]\n"
        "print(missing)",
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_apis_package_loads_each_name_on_use_and_keeps_its_functions(tmp_path):
    """``infertap.apis`` loads its readers when a name is asked for; a module named as one of its
    functions (``unfinished``), imported first by another module, doesn't take the function's place."""
    done = _run(
        "import sys\n"
        "import infertap.apis.body\n"
        "assert 'infertap.apis.read' not in sys.modules, sorted(sys.modules)\n"
        "from infertap.apis.unfinished import cut_short\n"
        "from infertap.apis import unfinished, read_request\n"
        "print(type(unfinished).__name__, callable(read_request))",
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["function", "True"]


#: What only a decode needs: the decoder, the API readers it runs (msgspec's, in the decoded case with
#: numpy and pyarrow), linking. A warm ``stats`` imported them all for the decode's version, a few
#: constants and ``infertap.apis``'s every name (the first import of its package): a third of its imports.
DECODER_ONLY = [
    "infertap.analysis.decode",
    "infertap.apis.chat_request",
    "infertap.apis.chat_stream",
    "infertap.apis.conversation",
    "infertap.apis.linking",
    "infertap.apis.read",
]
DECODE_PACKAGES = {"msgpack", "msgspec", "numpy", "pyarrow", "zstandard"}
NEVER_IN_STATS = ["infertap.capture.info", "infertap.capture.writer"]  # the capture's summary, the recorder's writer


def test_stats_on_a_cached_capture_imports_no_http_client_nor_engine_adapters(tmp_path):
    """``infertap stats`` reads recorded gauges only and runs no event loop: httpx (with its CLI's
    rich and pygments), the engines' adapters, psutil, asyncio, the other commands' modules and the
    lookup of infertap's own version were a quarter of a warm command's imports. DuckDB reads the
    cache's Parquet itself: numpy and pyarrow, which only the decode needs, were another sixth."""
    from tests.analysis_builders import exchange, sse, write_capture

    answer = sse({"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}]}, "[DONE]")
    capture = write_capture(tmp_path / "run", [exchange("x1", chunks=[(5.0, answer)])])
    others = [f"infertap.cli_{name}" for name in ("claim", "compare", "mitm", "replay", "sweep")]  # other commands
    code = (
        "import json, sys\n"
        "from click.testing import CliRunner\n"
        "from infertap.cli import cli\n"
        f"done = CliRunner().invoke(cli, ['stats', {str(capture)!r}, '--cache-dir', {str(tmp_path / 'cache')!r}, '--json'])\n"
        "assert done.exit_code == 0, done.output\n"
        "v = sys.modules.get('infertap.version')\n"
        "looked_up = v is not None and (not hasattr(v, 'installed_version') or v.installed_version.cache_info().currsize > 0)\n"
        "print(json.dumps([json.loads(done.stdout)['groups'][0]['requests'], looked_up, "
        f"sorted(m for m in sys.modules if m.split('.')[0] in ('asyncio', 'httpx', 'msgpack', 'msgspec', 'numpy', 'psutil', 'pyarrow', 'rich', 'zstandard') or m.startswith('infertap.engines') or m in {[*others, *DECODER_ONLY, *NEVER_IN_STATS]!r})]))"
    )
    for decoded in (True, False):  # decoded, then read from the cache
        done = _run(code, tmp_path)
        assert done.returncode == 0, done.stderr
        requests, looked_up, heavy = json.loads(done.stdout)
        assert requests == 1
        # The decode reads the segments (zstandard, msgpack), writes Parquet with numpy and pyarrow and
        # reads the answers with every API's reader (msgspec); a warm command reads the cache's
        # columns with none of them, and lists the segments for the cache key without the reader.
        used = {m for m in heavy if m in DECODER_ONLY or m.split(".")[0] in DECODE_PACKAGES}
        assert {m.split(".")[0] for m in used} == ({"infertap", *DECODE_PACKAGES} if decoded else set())
        assert [m for m in heavy if m not in used] == []
        assert looked_up is False  # infertap's version: read from its metadata only where written or printed


def test_a_recorder_that_does_not_probe_imports_no_http_client_nor_engine_adapters(tmp_path):
    """``infertap record --no-probe --no-telemetry`` forwards with its own client: httpx (with its
    CLI's rich and pygments) and the engine adapters, imported by the proxy's traffic gate through
    the engines package, were a third of its start's imports (2.5 s -> 1.8 s to listening, loaded
    2-core machine). A recorder that probes imports them (must differ)."""
    from tests.fake_upstream import FakeUpstream, ServerThread

    code = (
        "import json, signal, sys, threading\nfrom pathlib import Path\n"
        "from infertap.proxy.server import RecordConfig, serve\n"
        f"config = RecordConfig(upstream=sys.argv[1], out=Path({str(tmp_path)!r}) / sys.argv[2], port=0, telemetry=False, probe=sys.argv[2] == 'probe')\n"
        "def ready(listen, writer):\n"
        "    print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('httpx', 'httpcore', 'rich', 'pygments') or m.startswith('infertap.engines.'))), flush=True)\n"
        "    threading.Timer(0, signal.raise_signal, [signal.SIGTERM]).start()\n"
        "serve(config, on_ready=ready)\n"
    )
    with ServerThread(FakeUpstream()) as upstream:
        found = {}
        for probe in ("no-probe", "probe"):
            done = subprocess.run(
                [sys.executable, "-c", code, upstream.url, probe], cwd=tmp_path, capture_output=True, text=True, timeout=60
            )
            assert done.returncode == 0, done.stderr
            found[probe] = json.loads(done.stdout.splitlines()[0])
    assert found["no-probe"] == ["infertap.engines.gguf_check", "infertap.engines.trafficgate"]
    assert {"httpx", "rich", "infertap.engines.kinds", "infertap.engines.enrich"} <= set(found["probe"])
