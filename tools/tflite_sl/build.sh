#!/bin/sh
# Build TensorFlow Lite 2.8's benchmark_model (with its NNAPI delegate and
# nnapi/sl/ Support Library loader) and tools/tflite_sl/sl_client.cc on Linux,
# from sources in SRC_DIR, into BUILD_DIR.  Nothing is downloaded by CMake.
#
#   tools/tflite_sl/build.sh SRC_DIR [BUILD_DIR]     (BUILD_DIR: SRC_DIR/../tflite_build)
#
# SRC_DIR/<name> must hold each source tree below at the commit named (the tree
# of that commit, e.g. `git archive COMMIT | tar -x -C SRC_DIR/<name>`).  A name
# missing from SRC_DIR is extracted from a bare mirror
# $NNAPI_PY_GIT_MIRRORS/<owner>+<repo>/repo when that exists, else cloned from
# GitHub when the network allows.  These are exactly the commits TFLite 2.8's
# tensorflow/lite/tools/cmake/modules/*.cmake pin:
#
#   tflite        frak0d/tflite                02b09c6c2b69380196c1de80068f668bca2ef767
#                 (TensorFlow 2.8's tensorflow/lite subtree and the parts of
#                  tensorflow/core it includes; first release with
#                  --nnapi_support_library_path and tflite::nnapi::loadNnApiSupportLibrary)
#   abseil-cpp    abseil/abseil-cpp            997aaf3a28308eba1b9156aa35ab7bca9688e9f6
#   eigen         live-clones/eigen            085c2fc5d53f391afcccce21c45e15f61c827ab1
#                 (GitHub mirror of gitlab.com/libeigen/eigen, same commit)
#   farmhash      google/farmhash              0d859a811870d10f53a594927d0d0b97573ad06d
#   fft2d         petewarden/OouraFFT          v1.0 = c6fd2dd6d21397baa6653139d31d84540d5449a2
#   flatbuffers   google/flatbuffers           v1.12.0 = 6df40a2471737b27271bdd9b900ab5f3aec746c7
#   gemmlowp      google/gemmlowp              fda83bdc38b118cc6b56753bd540caa49e570745
#   neon2sse      intel/ARM_NEON_2_x86_SSE     1200fe90bb174a6224a525ee60148671a786a71f
#   clog          pytorch/cpuinfo              d5e37adf1406cf899d7d9ec1d317c47506ccb970
#   cpuinfo       pytorch/cpuinfo              5916273f79a21551890fd3d56fc5375a78d1598d
#   ruy           google/ruy                   e6c1b8dc8a8b00ee74e7268aac8b18d7260ab1ce
#   fp16_headers  Maratyszcza/FP16             0a92994d729ff76a58f692d3028ca1b64b145d91
#
# TFLite 2.8's CMake builds NNAPI only for Android; three edits (applied below
# to SRC_DIR/tflite, idempotently) make it build the same sources on Linux:
#   1. tensorflow/lite/CMakeLists.txt: do not force _TFLITE_ENABLE_NNAPI off on
#      non-Android; add nnapi/sl/SupportLibrary.cc to the NNAPI sources (Bazel
#      builds it, CMake 2.8 forgot it); add tools/benchmark (the subtree's
#      top-level file dropped that line of upstream's).
#   2. tensorflow/lite/tools/benchmark/CMakeLists.txt: link
#      tools/delegates/nnapi_delegate_provider.cc (--use_nnapi,
#      --nnapi_support_library_path) on Linux as on Android.
# XNNPACK and GPU are off (not needed; fewer dependencies).  On Linux the
# delegate's default NnApi dlopen()s "libneuralnetworks.so" (found through
# LD_LIBRARY_PATH), and /dev/shm replaces ASharedMemory.
set -eu
SRC=$(cd "${1:?usage: build.sh SRC_DIR [BUILD_DIR]}" && pwd)
BUILD=${2:-$SRC/../tflite_build}
mkdir -p "$BUILD"
BUILD=$(cd "$BUILD" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
JOBS=${JOBS:-2}  # OPT (default -O1): the optimization flags

get() {  # name owner/repo commit
    [ -d "$SRC/$1" ] && return 0
    mirror="${NNAPI_PY_GIT_MIRRORS:-/nonexistent}/$(echo "$2" | tr / +)/repo"
    mkdir -p "$SRC/$1.tmp"
    if [ -d "$mirror" ]; then
        echo "extracting $2@$3 from $mirror"
        # (the tflite snapshot lacks one large grappler test-data blob; not needed)
        git --git-dir="$mirror" archive "$3" -- . \
            ':(exclude)tensorflow/core/grappler/costs/graph_properties_testdata' |
            tar -x -C "$SRC/$1.tmp"
    else
        echo "cloning https://github.com/$2 at $3"
        rm -rf "$SRC/$1.tmp"
        git clone -q "https://github.com/$2" "$SRC/$1.tmp"
        git -C "$SRC/$1.tmp" checkout -q "$3"
    fi
    mv "$SRC/$1.tmp" "$SRC/$1"
}
get tflite       frak0d/tflite             02b09c6c2b69380196c1de80068f668bca2ef767
get abseil-cpp   abseil/abseil-cpp         997aaf3a28308eba1b9156aa35ab7bca9688e9f6
get eigen        live-clones/eigen         085c2fc5d53f391afcccce21c45e15f61c827ab1
get farmhash     google/farmhash           0d859a811870d10f53a594927d0d0b97573ad06d
get fft2d        petewarden/OouraFFT       c6fd2dd6d21397baa6653139d31d84540d5449a2
get flatbuffers  google/flatbuffers        6df40a2471737b27271bdd9b900ab5f3aec746c7
get gemmlowp     google/gemmlowp           fda83bdc38b118cc6b56753bd540caa49e570745
get neon2sse     intel/ARM_NEON_2_x86_SSE  1200fe90bb174a6224a525ee60148671a786a71f
get clog         pytorch/cpuinfo           d5e37adf1406cf899d7d9ec1d317c47506ccb970
get cpuinfo      pytorch/cpuinfo           5916273f79a21551890fd3d56fc5375a78d1598d
get ruy          google/ruy                e6c1b8dc8a8b00ee74e7268aac8b18d7260ab1ce
get fp16_headers Maratyszcza/FP16          0a92994d729ff76a58f692d3028ca1b64b145d91

python3 - "$SRC/tflite/tensorflow/lite" <<'PY'
import sys, pathlib
lite = pathlib.Path(sys.argv[1])
def patch(rel, edits):
    p = lite / rel
    text = p.read_text()
    if "nnapi_py" in text:
        return
    for old, new in edits:
        assert text.count(old) == 1, (rel, old)
        text = text.replace(old, new)
    p.write_text(text)
    print("patched", rel)
patch("CMakeLists.txt", [
    ('if(NOT "${CMAKE_SYSTEM_NAME}" STREQUAL "Android")\n  set(_TFLITE_ENABLE_NNAPI OFF)\nendif()\n',
     '# nnapi_py: NNAPI (and its Support Library loader) on Linux too.\n'),
    ('# TFLite library\n',
     'if(_TFLITE_ENABLE_NNAPI)  # nnapi_py\n'
     '  list(APPEND TFLITE_NNAPI_SRCS "${TFLITE_SOURCE_DIR}/nnapi/sl/SupportLibrary.cc")\n'
     'endif()\n# TFLite library\n'),
])
with open(lite / "CMakeLists.txt", "a") as f:
    if "tools/benchmark)" not in (lite / "CMakeLists.txt").read_text():
        f.write("\n# nnapi_py: the benchmark tool, as upstream's file has it.\n"
                "add_subdirectory(${TFLITE_SOURCE_DIR}/tools/benchmark)\n")
patch("tools/benchmark/CMakeLists.txt", [
    ('if(TFLITE_ENABLE_GPU)\n',
     'if(_TFLITE_ENABLE_NNAPI AND NOT CMAKE_SYSTEM_NAME MATCHES "Android")  # nnapi_py\n'
     '  list(APPEND TFLITE_BENCHMARK_SRCS\n'
     '    ${TFLITE_SOURCE_DIR}/tools/delegates/nnapi_delegate_provider.cc\n'
     '  )\n'
     'endif()\n\n'
     'if(TFLITE_ENABLE_GPU)\n'),
])
PY

fc=""
for d in abseil-cpp eigen farmhash fft2d flatbuffers gemmlowp neon2sse clog cpuinfo ruy fp16_headers; do
    fc="$fc -DFETCHCONTENT_SOURCE_DIR_$(echo $d | tr a-z A-Z)=$SRC/$d"
done
# shellcheck disable=SC2086
# -O1: the delegate only forwards to the NNAPI library, which does the computing,
# so optimization hardly matters and -O1 compiles TFLite's kernels much faster.
cmake -S "$HERE" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_FLAGS_RELEASE="${OPT:--O1} -DNDEBUG" -DCMAKE_CXX_FLAGS_RELEASE="${OPT:--O1} -DNDEBUG" \
    -DTFLITE_SOURCE_ROOT="$SRC/tflite" \
    -DTFLITE_ENABLE_NNAPI=ON -DTFLITE_ENABLE_XNNPACK=OFF -DTFLITE_ENABLE_GPU=OFF \
    -DFETCHCONTENT_FULLY_DISCONNECTED=ON -DFETCHCONTENT_QUIET=ON $fc
nice -n 19 cmake --build "$BUILD" -j "$JOBS" --target benchmark_model sl_client -- -k 0
echo "built: $BUILD/tflite/tools/benchmark/benchmark_model and $BUILD/sl_client"
