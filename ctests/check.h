/*
 * ctests/check.h -- tiny check framework shared by the C API contract tests.
 *
 *   CHECK_EQ(expr, code)   expr (an int/long result) must equal code
 *   CHECK_RC(expr, code)   same, but prints the result codes by name
 *   CHECK(cond)            a boolean condition must hold
 *   CHECK_MSG(cond, ...)   same, with a printf-style explanation on failure
 *   REQUIRE_RC(expr, code) CHECK_RC, and on failure return from the (void) function:
 *                          for setup steps whose failure would only cause noise
 *   check_summary()        prints the final "N passed, M failed" line and
 *                          returns the process exit status (0 = all passed)
 *
 * Every failure prints "FAIL file:line: ..." on stdout together with the
 * library's last error message for the calling thread (nnapi_py_last_error(),
 * looked up weakly so that the tests still link against a library that does
 * not provide it).  Checks are thread-safe (atomic counters, the expression being
 * evaluated kept per thread): the threaded tests run clean under ThreadSanitizer.
 *
 * check_init() installs handlers for crash signals and a watchdog alarm that
 * report which check was being evaluated, so a crash or hang inside the
 * library is pinpointed instead of just killing the program.
 *
 * All output goes to stdout; stderr is left to the library.
 */
#ifndef NNAPI_PY_CTESTS_CHECK_H
#define NNAPI_PY_CTESTS_CHECK_H

#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <android/NeuralNetworks.h>

#define CK_UNUSED __attribute__((unused))

/* Declared weakly: resolves to NULL if the library does not export it. */
extern const char* nnapi_py_last_error(void) __attribute__((weak));

/* Programs that load the library with dlopen() set this pointer themselves. */
static const char* (*ck_last_error_fn)(void) CK_UNUSED = 0;

static int ck_passed CK_UNUSED = 0;
static int ck_failed CK_UNUSED = 0;
static int ck_verbose CK_UNUSED = 0;
/* What this thread is evaluating right now (for the crash / hang reporter): per thread, so that
   checks made from many threads at once do not race (ThreadSanitizer runs these tests). */
static _Thread_local const char* volatile ck_cur_expr CK_UNUSED = "(setup)";
static _Thread_local const char* volatile ck_cur_file CK_UNUSED = "";
static _Thread_local volatile int ck_cur_line CK_UNUSED = 0;
/* The current section: set by the main thread, read by every thread (atomically). */
static const char* ck_section_name_ CK_UNUSED = "";
#define ck_section_name (__atomic_load_n(&ck_section_name_, __ATOMIC_ACQUIRE))

static CK_UNUSED const char* ck_result_name(long long code) {
    switch (code) {
        case ANEURALNETWORKS_NO_ERROR: return "NO_ERROR";
        case ANEURALNETWORKS_OUT_OF_MEMORY: return "OUT_OF_MEMORY";
        case ANEURALNETWORKS_INCOMPLETE: return "INCOMPLETE";
        case ANEURALNETWORKS_UNEXPECTED_NULL: return "UNEXPECTED_NULL";
        case ANEURALNETWORKS_BAD_DATA: return "BAD_DATA";
        case ANEURALNETWORKS_OP_FAILED: return "OP_FAILED";
        case ANEURALNETWORKS_BAD_STATE: return "BAD_STATE";
        case ANEURALNETWORKS_UNMAPPABLE: return "UNMAPPABLE";
        case ANEURALNETWORKS_OUTPUT_INSUFFICIENT_SIZE: return "OUTPUT_INSUFFICIENT_SIZE";
        case ANEURALNETWORKS_UNAVAILABLE_DEVICE: return "UNAVAILABLE_DEVICE";
        case ANEURALNETWORKS_MISSED_DEADLINE_TRANSIENT: return "MISSED_DEADLINE_TRANSIENT";
        case ANEURALNETWORKS_MISSED_DEADLINE_PERSISTENT: return "MISSED_DEADLINE_PERSISTENT";
        case ANEURALNETWORKS_RESOURCE_EXHAUSTED_TRANSIENT: return "RESOURCE_EXHAUSTED_TRANSIENT";
        case ANEURALNETWORKS_RESOURCE_EXHAUSTED_PERSISTENT: return "RESOURCE_EXHAUSTED_PERSISTENT";
        case ANEURALNETWORKS_DEAD_OBJECT: return "DEAD_OBJECT";
        default: return "?";
    }
}

static CK_UNUSED const char* ck_last_error(void) {
    const char* s = 0;
    if (ck_last_error_fn) s = ck_last_error_fn();
    else if (nnapi_py_last_error) s = nnapi_py_last_error();
    else return "(nnapi_py_last_error not available)";
    return s ? s : "(null)";
}

static CK_UNUSED void ck_section(const char* name) {
    __atomic_store_n(&ck_section_name_, name, __ATOMIC_RELEASE);
    if (ck_verbose) printf("== %s\n", name);
    fflush(stdout);
}

static CK_UNUSED void ck_pass(void) { __atomic_fetch_add(&ck_passed, 1, __ATOMIC_SEQ_CST); }

static CK_UNUSED void ck_fail_v(const char* file, int line, const char* fmt, va_list ap) {
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    __atomic_fetch_add(&ck_failed, 1, __ATOMIC_SEQ_CST);
    /* one printf per failure so that lines from different threads do not interleave */
    printf("FAIL %s:%d [%s]: %s\n", file, line, ck_section_name, msg);
    fflush(stdout);
}

static CK_UNUSED void ck_fail(const char* file, int line, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    ck_fail_v(file, line, fmt, ap);
    va_end(ap);
}

static CK_UNUSED int ck_eq(long long got, long long want, int names, const char* expr,
                           const char* wexpr, const char* file, int line) {
    if (got == want) {
        ck_pass();
        if (ck_verbose > 1) printf("ok   %s:%d: %s == %s\n", file, line, expr, wexpr);
        return 1;
    }
    if (names)
        ck_fail(file, line, "%s -> %lld (%s), expected %s = %lld (%s); last_error: %s", expr, got,
                ck_result_name(got), wexpr, want, ck_result_name(want), ck_last_error());
    else
        ck_fail(file, line, "%s -> %lld, expected %s = %lld", expr, got, wexpr, want);
    return 0;
}

static CK_UNUSED int ck_true(int cond, const char* expr, const char* file, int line,
                             const char* fmt, ...) {
    if (cond) {
        ck_pass();
        return 1;
    }
    char extra[768] = "";
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(extra, sizeof extra, fmt, ap);
        va_end(ap);
    }
    ck_fail(file, line, "check failed: %s%s%s", expr, extra[0] ? " -- " : "", extra);
    return 0;
}

#define CK_MARK(e) (ck_cur_expr = (e), ck_cur_file = __FILE__, ck_cur_line = __LINE__)

/* expr must evaluate to `code`; result codes are printed by name. Returns 1 if passed. */
#define CHECK_RC(expr, code) \
    (CK_MARK(#expr), ck_eq((long long)(expr), (long long)(code), 1, #expr, #code, __FILE__, __LINE__))
#define CHECK_EQ(expr, code) CHECK_RC(expr, code)
/* plain value equality (no result-code names) */
#define CHECK_VAL(expr, want) \
    (CK_MARK(#expr), ck_eq((long long)(expr), (long long)(want), 0, #expr, #want, __FILE__, __LINE__))
/* In a void function: check, and on failure skip the rest of the function (setup steps). */
#define REQUIRE_RC(expr, code)                                             \
    do {                                                                   \
        if (!CHECK_RC(expr, code)) {                                       \
            printf("  (%s: skipping the rest of this part)\n", ck_section_name); \
            return;                                                        \
        }                                                                  \
    } while (0)
#define CHECK(cond) (CK_MARK(#cond), ck_true(!!(cond), #cond, __FILE__, __LINE__, NULL))
#define CHECK_MSG(cond, ...) (CK_MARK(#cond), ck_true(!!(cond), #cond, __FILE__, __LINE__, __VA_ARGS__))

static CK_UNUSED void ck_write_str(const char* s) {
    if (!s) s = "(null)";
    ssize_t r = write(1, s, strlen(s));
    (void)r;
}

static CK_UNUSED void ck_write_int(long v) {
    char buf[32];
    int i = 31, neg = v < 0;
    unsigned long u = neg ? (unsigned long)(-v) : (unsigned long)v;
    buf[i] = 0;
    do {
        buf[--i] = (char)('0' + u % 10);
        u /= 10;
    } while (u && i > 1);
    if (neg) buf[--i] = '-';
    ck_write_str(buf + i);
}

static CK_UNUSED void ck_signal_handler(int sig) {
    /* async-signal-safe reporting only */
    ck_write_str(sig == SIGALRM ? "\nHANG (watchdog) " : "\nCRASH (signal ");
    if (sig != SIGALRM) {
        ck_write_int(sig);
        ck_write_str(") ");
    }
    ck_write_str("while evaluating `");
    ck_write_str(ck_cur_expr);
    ck_write_str("` at ");
    ck_write_str(ck_cur_file);
    ck_write_str(":");
    ck_write_int(ck_cur_line);
    ck_write_str(" [");
    ck_write_str(ck_section_name);
    ck_write_str("]\n");
    ck_write_int(__atomic_load_n(&ck_passed, __ATOMIC_SEQ_CST));
    ck_write_str(" passed, ");
    ck_write_int(__atomic_load_n(&ck_failed, __ATOMIC_SEQ_CST) + 1);
    ck_write_str(" failed\n");
    signal(sig, SIG_DFL);
    if (sig == SIGALRM) _exit(124);
    raise(sig);
}

/* watchdog_seconds: 0 = no watchdog */
static CK_UNUSED void check_init(unsigned watchdog_seconds) {
    const char* v = getenv("NNAPI_CTEST_VERBOSE");
    ck_verbose = v ? atoi(v) : 0;
    setvbuf(stdout, NULL, _IOLBF, 0);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = ck_signal_handler;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, NULL);
    sigaction(SIGBUS, &sa, NULL);
    sigaction(SIGFPE, &sa, NULL);
    sigaction(SIGILL, &sa, NULL);
    sigaction(SIGABRT, &sa, NULL);
    if (watchdog_seconds) {
        sigaction(SIGALRM, &sa, NULL);
        alarm(watchdog_seconds);
    }
}

static CK_UNUSED int check_summary(void) {
    alarm(0);
    int p = __atomic_load_n(&ck_passed, __ATOMIC_SEQ_CST);
    int f = __atomic_load_n(&ck_failed, __ATOMIC_SEQ_CST);
    printf("%d passed, %d failed\n", p, f);
    fflush(stdout);
    return f ? 1 : 0;
}

#endif /* NNAPI_PY_CTESTS_CHECK_H */
