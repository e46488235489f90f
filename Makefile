# The two quick-start commands: `make demo` and `make test`. Each installs what it needs
# into .venv first (once; again when pyproject.toml or this Makefile changes).
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test lint install bench

$(STAMP): pyproject.toml Makefile
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[test]"
	@# torch is optional: install the pinned CPU build only where its wheel is on this machine,
	@# so that no machine ever downloads the CUDA build. Without it, torch tests skip.
	@# torchvision (the release made for torch 2.13) goes without dependencies, for the same reason;
	@# so do transformers and timm, after their pure-Python dependencies.
	@if ls /opt/wheels/torch-2.13.0* >/dev/null 2>&1; then \
		$(PY) -m pip install -q "torch==2.13.0" || echo "torch install failed; torch tests will skip"; \
		$(PY) -m pip install -q --no-deps "torchvision==0.28.0" pillow \
			|| echo "torchvision install failed; torchvision model tests will skip"; \
		$(PY) -m pip install -q "huggingface_hub>=1.31,<3" "tokenizers>=0.23.1,<0.24" \
			"regex>=2025.10.22" tqdm typer pyyaml "safetensors>=0.8.0" \
			&& $(PY) -m pip install -q --no-deps "transformers==5.23.0" "timm==1.0.31" \
			|| echo "transformers/timm install failed; model-zoo tests will skip"; \
	else echo "no local torch wheel; torch tests will skip"; fi
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/opbridge demo

test: $(STAMP)
	$(PY) -m pytest -q -n 2

lint: $(STAMP)
	$(VENV)/bin/ruff check opbridge tests bench
