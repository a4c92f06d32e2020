"""The one build step pyproject.toml cannot declare: the model-card templates ship inside the package (issue #49).

The templates stay in the repository's top-level ``model_cards/`` (one copy in git, beside the code that reads
them); building a wheel copies that folder to ``deep_nmt_hf/model_cards/``, where ``deep_nmt_hf.publish.hub.card_dir()``
looks first. An editable install reads the repository's folder. All metadata lives in pyproject.toml; MANIFEST.in
puts ``model_cards/`` in the sdist, so a wheel built from the sdist carries it too (.ci/wheel_check).
"""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

CARDS = Path(__file__).resolve().parent / "model_cards"
INSIDE = ("deep_nmt_hf", "model_cards")  # where the wheel holds them


class BuildPyWithCards(build_py):
    """`build_py` that also copies ``model_cards/`` into the built package (not in editable mode: no build)."""

    def _cards(self) -> dict[str, str]:
        """{file in the build: its source} for every template."""
        if not (CARDS / "card.md.j2").is_file():
            raise FileNotFoundError(
                f"{CARDS}: the model-card templates are missing (an sdist without MANIFEST.in?)"
            )
        files = (p for p in sorted(CARDS.rglob("*")) if p.is_file() and "__pycache__" not in p.parts)
        return {
            str(Path(self.build_lib, *INSIDE, path.relative_to(CARDS))): str(path)
            for path in files
            if not path.name.startswith(".")
        }

    def run(self) -> None:
        super().run()
        if not self.editable_mode:
            for target, source in self._cards().items():
                self.mkpath(str(Path(target).parent))
                self.copy_file(source, target)

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        outputs = super().get_outputs(include_bytecode)  # in editable mode: the keys of get_output_mapping
        return outputs if self.editable_mode else [*outputs, *self._cards()]

    def get_output_mapping(self) -> dict[str, str]:
        return {**super().get_output_mapping(), **self._cards()}


setup(cmdclass={"build_py": BuildPyWithCards})
