#!/bin/bash
# Run tcdsl's CUDA tests and GPU benchmarks on a GPU machine that has no network
# and takes files in transfers of limited size (how session 12 ran them on an H100).
#
# Here (a machine with the project's .venv and pip's network access):
#     tools/offline-gpu.sh pack [DIR]        # default DIR: .offline-gpu (git-ignored)
# writes DIR/part1 and DIR/part2, each under 50 MB: wheels of apache-tvm-ffi, islpy and
# lark for the GPU machine's Python (PY, default 3.12), the tvm Python package of
# .venv without its 259 MB compiler library, and that library xz-compressed with the
# x86 filter (57.8 MB for apache-tvm 0.27.0.post1; about 5 minutes) split in two.
# The apache-tvm wheel itself (100 MB) would not fit one transfer.
#
# There (the GPU machine: python3 with numpy, ml_dtypes, torch, pytest, pytest-xdist
# and nvcc installed), from the repository's root, once per part sent:
#     tools/offline-gpu.sh stage DIR/part1    # then, in the next transfer:
#     tools/offline-gpu.sh stage DIR/part2
#     tools/offline-gpu.sh check tests bench  # OUT=folder for logs and results
# `stage` copies a part to /tmp/tcdsl-offline (it survives while the machine does);
# `install` puts everything into /tmp/site (once; `check` does it first); `check` runs:
#   tests  pytest -n 14 -m "cuda or not slow" tests/test_cuda.py  (about 60 s on an H100)
#   bench  benchmarks/cuda_rnn.py --rounds 7 --repeat 5          (about 65 s)
set -u
cmd=${1:-}
shift || true
STAGE=/tmp/tcdsl-offline
SITE=/tmp/site

pack() {
    local dir=${1:-.offline-gpu} py=${PY:-3.12}
    local site
    site=$(.venv/bin/python -c "import os, tvm; print(os.path.dirname(os.path.dirname(tvm.__file__)))") || exit 1
    rm -rf "$dir" && mkdir -p "$dir/part1/whl" "$dir/part2" || exit 1
    local tag=${py/./}
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$py" --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 \
        --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$dir/part1/whl" \
        "apache-tvm-ffi==$(.venv/bin/python -c 'import importlib.metadata as m; print(m.version("apache-tvm-ffi"))')" \
        "islpy==$(.venv/bin/python -c 'import importlib.metadata as m; print(m.version("islpy"))')" \
        "lark==$(.venv/bin/python -c 'import importlib.metadata as m; print(m.version("lark"))')" || exit 2
    ls "$dir/part1/whl" | grep -q "cp$tag" || echo "warning: no cp$tag wheel among $(ls "$dir/part1/whl")"
    tar -C "$site" --exclude='tvm/lib/libtvm_compiler.so' --exclude='tvm/3rdparty' --exclude='tvm/src' \
        --exclude='tvm/web' --exclude='__pycache__' -cJf "$dir/part1/tvm_py.tar.xz" tvm || exit 3
    xz -T2 --x86 --lzma2=preset=9e,dict=256MiB -c "$site/tvm/lib/libtvm_compiler.so" > "$dir/compiler.xz" || exit 4
    split -b 40000000 "$dir/compiler.xz" "$dir/compiler.xz." && rm "$dir/compiler.xz" || exit 5
    mv "$dir/compiler.xz.aa" "$dir/part1/compiler.xz.aa" && mv "$dir/compiler.xz."* "$dir/part2/" || exit 5
    du -sh "$dir/part1" "$dir/part2"
}

stage() {
    mkdir -p "$STAGE" && cp -r "$1"/. "$STAGE"/ && ls "$STAGE"
}

install() {
    [ -f "$SITE/tvm/lib/libtvm_compiler.so" ] && return 0
    ls "$STAGE"/compiler.xz.a? > /dev/null 2>&1 || { echo "nothing staged in $STAGE"; exit 6; }
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" "$STAGE"/whl/*.whl \
        || exit 3
    tar -C "$SITE" -xJf "$STAGE/tvm_py.tar.xz" || exit 4
    cat "$STAGE"/compiler.xz.a? | xz -dc > "$SITE/tvm/lib/libtvm_compiler.so" \
        || { rm -f "$SITE/tvm/lib/libtvm_compiler.so"; echo "a part is missing: stage both"; exit 5; }
}

check() {
    install
    local out=${OUT:-$PWD/offline-gpu-results}
    mkdir -p "$out"
    # the grammar ships as the package tcdsl.grammar (pyproject.toml's package-dir)
    [ -d tcdsl/grammar ] || cp -r grammar tcdsl/grammar
    local cudart
    cudart=$(find /opt /usr/local /usr/lib -name 'libcudart.so.1*' 2>/dev/null | head -1)
    export LD_LIBRARY_PATH=${cudart:+$(dirname "$cudart"):}${LD_LIBRARY_PATH:-} PYTHONPATH=$SITE:$PWD
    export TCDSL_DISK_CACHE=0 PYTHONUNBUFFERED=1
    nvidia-smi -L; nvcc --version | tail -1; python3 -V
    python3 -c "import tvm, torch; d = tvm.cuda(0); print('TVM sees', d.device_name, d.exist, '| torch', torch.__version__)"
    for step in "$@"; do
        case $step in
            tests) timeout "${TESTS_S:-300}" python3 -m pytest -q -n 14 -p no:cacheprovider -m "cuda or not slow" \
                       tests/test_cuda.py 2>&1 | tee "$out/test_cuda.log" | tail -30 ;;
            bench) timeout "${BENCH_S:-300}" python3 benchmarks/cuda_rnn.py --rounds 7 --repeat 5 --out "$out" 2>&1 \
                       | tee "$out/bench.log" ;;
            *) echo "unknown step '$step' (tests, bench)"; exit 2 ;;
        esac
    done
}

case $cmd in
    pack) pack "$@" ;;
    stage) [ $# -eq 1 ] || { echo "usage: $0 stage DIR"; exit 2; }; stage "$1" ;;
    install) install ;;
    check) check "$@" ;;
    *) sed -n '2,22p' "$0"; exit 2 ;;
esac
