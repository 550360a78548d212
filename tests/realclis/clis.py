"""The six real CLIs: how each is pointed at its fake model, as /tmp/realclis/README.md says.

Each is configured the way a user would: a repository spec that `extends` the
shipped one (`.gitswarm/adapters/<name>.toml`), adding only the endpoint, key
and model (and the proxy variables that send any other traffic to the egress
logger); for hermes the user's own `$HERMES_HOME/config.yaml`, which is where
Hermes reads a custom endpoint from (environment variables are not enough).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


def proxy_env(lab: Any) -> str:
    """[env] lines sending everything but the loopback to the egress logger (as run_all.sh does)."""
    proxy = f"http://127.0.0.1:{lab.egress_port}"
    lines = [f'{name} = "{proxy}"' for name in ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy")]
    lines += ['NO_PROXY = "127.0.0.1,localhost"', 'no_proxy = "127.0.0.1,localhost"']
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class CLI:
    key: str  # pytest id, and the VERSIONS.txt name
    adapter: str  # the shipped spec it extends
    binary: str
    fake: str  # the fake model server under /tmp/realclis
    fake_args: tuple[str, ...]
    spec: Callable[[Any], str]  # the repository's .gitswarm/adapters/<adapter>.toml
    prepare: Callable[[Any], None] = lambda lab: None
    needs: tuple[str, ...] = ()  # other executables it needs on PATH
    edit_tool: str = ""  # the CLI's own edit tool the fake model calls (as the realclis e2e scripts do)
    #: hosts it contacts that no flag, variable or setting was found to stop (realclis README),
    #: listed in the table rather than failed
    unsilenceable: tuple[str, ...] = ()

    @property
    def process_names(self) -> tuple[str, ...]:
        return (self.binary,)


def claude_spec(lab: Any) -> str:
    return f"""# The shipped spec, pointed at a fake Anthropic API on the loopback.
extends = "claude-code"

[env]
ANTHROPIC_BASE_URL = "http://127.0.0.1:{lab.port}"
ANTHROPIC_API_KEY = "dummy"
{proxy_env(lab)}"""


def codex_spec(lab: Any) -> str:
    # Braces doubled: a spec's arguments are templates ({prompt}, ...).
    provider = (f'model_providers.fake={{{{name="fake", base_url="http://127.0.0.1:{lab.port}/v1", '
                f'wire_api="responses", env_key="FAKE_OPENAI_KEY"}}}}')
    args = json.dumps(["-c", "model_provider=fake", "-c", provider])
    return f"""# The shipped spec, with a custom model provider (OPENAI_BASE_URL is ignored by codex).
extends = "codex"

[env]
FAKE_OPENAI_KEY = "dummy"
{proxy_env(lab)}
[analyze]
args = {args}

[implement]
args = {args}

# Its endpoint is in its arguments, not in a variable: network = "endpoint" needs it named (docs/sandbox.md).
[sandbox]
hosts = ["127.0.0.1:{lab.port}"]
"""


def gemini_spec(lab: Any) -> str:
    return f"""# The shipped spec, pointed at a fake Gemini API on the loopback.
extends = "gemini"

[env]
GEMINI_API_KEY = "dummy"
GOOGLE_GEMINI_BASE_URL = "http://127.0.0.1:{lab.port}"
{proxy_env(lab)}
# GOOGLE_GEMINI_BASE_URL alone selects the "gateway" auth type, which -p mode rejects.
[home_json.".gemini/settings.json".security.auth]
selectedType = "gemini-api-key"
"""


def aider_prepare(lab: Any) -> None:
    # Model metadata given locally, so aider does not fetch litellm's price map.
    (lab.base / "aider-model-metadata.json").write_text(json.dumps({"openai/fake-model": {
        "max_input_tokens": 128000, "max_output_tokens": 4096, "max_tokens": 4096,
        "input_cost_per_token": 0.000001, "output_cost_per_token": 0.000002,
        "litellm_provider": "openai", "mode": "chat"}}))


def aider_spec(lab: Any) -> str:
    args = json.dumps(["--openai-api-base", f"http://127.0.0.1:{lab.port}/v1", "--openai-api-key", "dummy",
                       "--model-metadata-file", str(lab.base / "aider-model-metadata.json")])
    return f"""# The shipped spec, pointed at a fake OpenAI-compatible API on the loopback.
extends = "aider"
model = "openai/fake-model"

[env]
{proxy_env(lab)}
[analyze]
args = {args}

[implement]
args = {args}

# Its endpoint is in its arguments, not in a variable: network = "endpoint" needs it named (docs/sandbox.md).
[sandbox]
hosts = ["127.0.0.1:{lab.port}"]
"""


def hermes_prepare(lab: Any) -> None:
    # The user's Hermes home: a custom endpoint lives in config.yaml (the run gets a copy).
    hermes_home = lab.base / "hermes-home"
    hermes_home.mkdir()
    (hermes_home / "config.yaml").write_text(
        "model:\n"
        "  provider: custom\n"
        f"  base_url: http://127.0.0.1:{lab.port}/v1\n"
        "  default: fake-model\n"
        "  api_key: dummy\n"
        "  context_length: 128000\n"
        "security:\n"
        "  tirith_enabled: false\n"
    )
    lab.env["HERMES_HOME"] = str(hermes_home)


def hermes_spec(lab: Any) -> str:
    return f"""# The shipped spec; the endpoint is in the user's $HERMES_HOME/config.yaml.
extends = "hermes"

[env]
{proxy_env(lab)}
# Its endpoint is in its config.yaml, not in a variable: network = "endpoint" needs it named (docs/sandbox.md).
[sandbox]
hosts = ["127.0.0.1:{lab.port}"]
"""


def omp_spec(lab: Any) -> str:
    return f"""# The shipped spec, pointed at a fake Anthropic API on the loopback.
extends = "omp"
model = "anthropic/claude-sonnet-4-5"

[env]
ANTHROPIC_BASE_URL = "http://127.0.0.1:{lab.port}"
ANTHROPIC_API_KEY = "dummy"
{proxy_env(lab)}"""


#: omp's model-catalog discovery on a cold home (realclis README, e2e_omp.sh): no kill switch found.
OMP_CATALOG = ("api.anthropic.com:443", "api.commandcode.ai:443", "api.kilo.ai:443", "api.venice.ai:443",
               "catalog.stencil.so:443", "coding-intl.dashscope.aliyuncs.com:443", "hyper.charm.land:443", "zenmux.ai:443")

CLIS = (
    CLI("claude", "claude-code", "claude", "fake_anthropic.py", (), claude_spec, edit_tool="Write"),
    CLI("codex", "codex", "codex", "fake_openai.py", (), codex_spec, edit_tool="apply_patch"),
    CLI("gemini", "gemini", "gemini", "fake_gemini.py", (), gemini_spec, edit_tool="write_file"),
    CLI("aider", "aider", "aider", "fake_openai.py", ("--aider-format", "whole"), aider_spec, aider_prepare,
        edit_tool="(aider edit block)"),
    CLI("hermes", "hermes", "hermes", "fake_openai.py", (), hermes_spec, hermes_prepare, edit_tool="write_file"),
    # omp's write tool is write{path, content, i}; relative paths resolve against its cwd.
    CLI("omp", "omp", "omp", "fake_anthropic.py",
        ("--write-tool", "write", "--path-key", "path", "--relative", "--extra-input", '{"i": "create file"}'),
        omp_spec, needs=("bun",), edit_tool="write", unsilenceable=OMP_CATALOG),
)
