// sl_client: run a .tflite model through TensorFlow Lite's real NNAPI delegate,
// either on an NNAPI Support Library loaded by path or on the system's
// libneuralnetworks.so, with fixed inputs, and print what was delegated and the
// outputs (exactly: floats as %.9g, which round-trips float32, plus a hash of
// each output's bytes).  Built by tools/tflite_sl/build.sh against TFLite 2.8.
//
//   sl_client MODEL.tflite --sl PATH   tflite::nnapi::loadNnApiSupportLibrary(PATH)
//                                      + StatefulNnApiDelegate(const NnApiSLDriverImplFL5*, options)
//   sl_client MODEL.tflite --direct    StatefulNnApiDelegate(options): the default NnApi,
//                                      which dlopen()s "libneuralnetworks.so"
//   sl_client MODEL.tflite --cpu       no delegate (TFLite's own kernels), for reference
//   options: --seed N (inputs), --runs N (invocations, outputs of the last printed)
//
// Exit status: 0 on success, 1 on a usage error, 2 when a step fails (named on stderr).
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "tensorflow/lite/delegates/nnapi/nnapi_delegate.h"
#include "tensorflow/lite/interpreter.h"
#include "tensorflow/lite/kernels/register.h"
#include "tensorflow/lite/model.h"
#include "tensorflow/lite/nnapi/sl/include/SupportLibrary.h"

namespace {

int Fail(const char* what) {
  std::fprintf(stderr, "sl_client: %s\n", what);
  return 2;
}

// Deterministic inputs: a 64-bit LCG per (seed, input index), so every mode
// and every run sees the same bytes.
struct Lcg {
  uint64_t s;
  explicit Lcg(uint64_t seed) : s(seed * 6364136223846793005ULL + 1442695040888963407ULL) {}
  uint32_t Next() {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<uint32_t>(s >> 33);
  }
  float Unit() { return static_cast<float>(Next() & 0xFFFFFF) / 16777216.0f; }  // [0, 1)
};

bool FillInput(TfLiteTensor* t, uint64_t seed) {
  Lcg rng(seed);
  const size_t n_bytes = t->bytes;
  switch (t->type) {
    case kTfLiteFloat32: {
      float* p = t->data.f;
      for (size_t i = 0; i < n_bytes / sizeof(float); ++i) p[i] = rng.Unit() * 2.0f - 1.0f;
      return true;
    }
    case kTfLiteUInt8:
    case kTfLiteInt8: {
      for (size_t i = 0; i < n_bytes; ++i) t->data.raw[i] = static_cast<char>(rng.Next() & 0xFF);
      return true;
    }
    case kTfLiteInt16: {
      int16_t* p = t->data.i16;
      for (size_t i = 0; i < n_bytes / 2; ++i) p[i] = static_cast<int16_t>(rng.Next() & 0xFFFF);
      return true;
    }
    case kTfLiteInt32: {  // small non-negative values: counts, indices, lengths
      int32_t* p = t->data.i32;
      for (size_t i = 0; i < n_bytes / 4; ++i) p[i] = static_cast<int32_t>(rng.Next() % 4);
      return true;
    }
    case kTfLiteBool: {
      for (size_t i = 0; i < n_bytes; ++i) t->data.raw[i] = static_cast<char>(rng.Next() & 1);
      return true;
    }
    default:
      return false;
  }
}

uint64_t Fnv1a(const char* p, size_t n) {
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < n; ++i) {
    h ^= static_cast<unsigned char>(p[i]);
    h *= 1099511628211ULL;
  }
  return h;
}

void PrintTensor(int index, const TfLiteTensor* t) {
  std::printf("output %d name=%s type=%s shape=[", index, t->name ? t->name : "",
              TfLiteTypeGetName(t->type));
  for (int d = 0; d < t->dims->size; ++d) std::printf(d ? ",%d" : "%d", t->dims->data[d]);
  std::printf("] scale=%.9g zero_point=%d bytes=%zu fnv1a=%016" PRIx64 "\n", t->params.scale,
              t->params.zero_point, t->bytes, Fnv1a(t->data.raw, t->bytes));
  std::printf("values");
  switch (t->type) {
    case kTfLiteFloat32:
      for (size_t i = 0; i < t->bytes / 4; ++i) std::printf(" %.9g", t->data.f[i]);
      break;
    case kTfLiteUInt8:
      for (size_t i = 0; i < t->bytes; ++i) std::printf(" %u", t->data.uint8[i]);
      break;
    case kTfLiteInt8:
      for (size_t i = 0; i < t->bytes; ++i) std::printf(" %d", t->data.int8[i]);
      break;
    case kTfLiteInt16:
      for (size_t i = 0; i < t->bytes / 2; ++i) std::printf(" %d", t->data.i16[i]);
      break;
    case kTfLiteInt32:
      for (size_t i = 0; i < t->bytes / 4; ++i) std::printf(" %d", t->data.i32[i]);
      break;
    default:
      for (size_t i = 0; i < t->bytes; ++i) std::printf(" %02x", static_cast<unsigned char>(t->data.raw[i]));
  }
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  const char* model_path = nullptr;
  const char* sl_path = nullptr;
  std::string mode;
  uint64_t seed = 1;
  int runs = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--sl" && i + 1 < argc) {
      mode = "sl";
      sl_path = argv[++i];
    } else if (a == "--direct" || a == "--cpu") {
      mode = a.substr(2);
    } else if (a == "--seed" && i + 1 < argc) {
      seed = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--runs" && i + 1 < argc) {
      runs = std::atoi(argv[++i]);
    } else if (!model_path && a[0] != '-') {
      model_path = argv[i];
    } else {
      model_path = nullptr;
      break;
    }
  }
  if (!model_path || mode.empty() || runs < 1) {
    std::fprintf(stderr,
                 "usage: sl_client MODEL.tflite (--sl LIBRARY.so | --direct | --cpu) "
                 "[--seed N] [--runs N]\n");
    return 1;
  }

  auto model = tflite::FlatBufferModel::BuildFromFile(model_path);
  if (!model) return Fail("cannot read the model (see the error above)");
  tflite::ops::builtin::BuiltinOpResolverWithoutDefaultDelegates resolver;
  std::unique_ptr<tflite::Interpreter> interpreter;
  if (tflite::InterpreterBuilder(*model, resolver)(&interpreter) != kTfLiteOk || !interpreter)
    return Fail("InterpreterBuilder failed");
  const size_t nodes_before = interpreter->nodes_size();

  // The Support Library must outlive the delegate, which must outlive the interpreter.
  std::unique_ptr<const tflite::nnapi::NnApiSupportLibrary> sl;
  std::unique_ptr<tflite::StatefulNnApiDelegate> delegate;
  tflite::StatefulNnApiDelegate::Options options;
  if (mode == "sl") {
    sl = tflite::nnapi::loadNnApiSupportLibrary(sl_path);
    if (!sl) return Fail("loadNnApiSupportLibrary failed (see the error above)");
    std::printf("support library %s implFeatureLevel=%" PRId64 " (as seen by TFLite)\n", sl_path,
                static_cast<int64_t>(sl->base.implFeatureLevel));
    delegate.reset(new tflite::StatefulNnApiDelegate(sl.get(), options));
  } else if (mode == "direct") {
    delegate.reset(new tflite::StatefulNnApiDelegate(options));
  }
  if (delegate) {
    if (interpreter->ModifyGraphWithDelegate(delegate.get()) != kTfLiteOk)
      return Fail("ModifyGraphWithDelegate failed");
    int nnapi_errno = delegate->GetNnApiErrno();
    if (nnapi_errno != 0) std::printf("nnapi errno %d\n", nnapi_errno);
  }

  // What the delegate took: each node of the execution plan is either an
  // original operation or a delegate kernel standing for a partition.
  int partitions = 0, delegated = 0, undelegated = 0;
  for (int node_index : interpreter->execution_plan()) {
    const auto* nr = interpreter->node_and_registration(node_index);
    if (nr->first.delegate != nullptr) {
      ++partitions;
      const auto* params = static_cast<const TfLiteDelegateParams*>(nr->first.builtin_data);
      delegated += params->nodes_to_replace->size;
    } else {
      ++undelegated;
    }
  }
  std::printf("mode=%s nodes=%zu delegated=%d partitions=%d undelegated=%d\n", mode.c_str(),
              nodes_before, delegated, partitions, undelegated);

  if (interpreter->AllocateTensors() != kTfLiteOk) return Fail("AllocateTensors failed");
  for (size_t i = 0; i < interpreter->inputs().size(); ++i) {
    TfLiteTensor* t = interpreter->tensor(interpreter->inputs()[i]);
    if (!FillInput(t, seed * 1000 + i)) return Fail("an input of an unsupported type");
  }
  for (int r = 0; r < runs; ++r)
    if (interpreter->Invoke() != kTfLiteOk) return Fail("Invoke failed");
  for (size_t i = 0; i < interpreter->outputs().size(); ++i)
    PrintTensor(static_cast<int>(i), interpreter->tensor(interpreter->outputs()[i]));
  // Tear down in order: interpreter (uses the delegate), delegate, library.
  interpreter.reset();
  delegate.reset();
  sl.reset();
  return 0;
}
