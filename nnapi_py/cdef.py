"""The NNAPI header as a cffi declaration, and the library opened through it.

``from nnapi_py import ffi, lib`` gives the header already declared (every enum value,
struct and the 69 functions plus the ``nnapi_py_*`` extras) and the built library opened
with it, for raw access exactly as in C.  Nothing here is imported by the runtime itself.
"""
import os
import re

_INT_SUFFIX = re.compile(r"\b(0[xX][0-9a-fA-F]+|\d+)[uUlL]+\b")
_SAFE_EXPR = re.compile(r"^[0-9a-fA-FxX()+\-*/%<>|&~^ \t]*$")


def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def _strip_preprocessor(text: str) -> str:
    """Drop preprocessor lines and the contents of #if(def) __cplusplus blocks."""
    out, stack = [], []          # stack entries: True if this block is skipped
    lines = text.replace("\\\n", " ").split("\n")
    for line in lines:
        s = line.strip()
        if s.startswith("#"):
            d = s[1:].strip()
            word = d.split(None, 1)[0] if d else ""
            if word in ("if", "ifdef", "ifndef"):
                cpp = "__cplusplus" in d and word != "ifndef" and "!" not in d
                stack.append(cpp)
            elif word in ("else", "elif"):
                if stack:
                    stack[-1] = not stack[-1] if word == "else" else stack[-1]
            elif word == "endif":
                if stack:
                    stack.pop()
            continue
        if any(stack):
            continue
        out.append(line)
    return "\n".join(out)


def _eval_enum_value(expr: str, known: dict):
    expr = _INT_SUFFIX.sub(r"\1", expr.strip())
    for name in sorted(known, key=len, reverse=True):
        if name in expr:
            expr = re.sub(r"\b%s\b" % re.escape(name), str(known[name]), expr)
    expr = expr.replace("/", "//")
    if not _SAFE_EXPR.match(expr):
        raise ValueError(f"cannot evaluate enum value {expr!r}")
    return int(eval(expr, {"__builtins__": {}}, {}))  # digits and operators only


def _rewrite_enums(text: str, enums: dict) -> str:
    """Replace every enum body by NAME = <integer literal> entries; collect the values."""

    def repl(m):
        head, body = m.group(1), m.group(2)
        entries, nxt = [], 0
        for item in body.split(","):
            item = item.strip()
            if not item:
                continue
            if "=" in item:
                name, expr = item.split("=", 1)
                name = name.strip()
                value = _eval_enum_value(expr, enums)
            else:
                name, value = item, nxt
            enums[name] = value
            entries.append(f"    {name} = {value},")
            nxt = value + 1
        return head + "{\n" + "\n".join(entries) + "\n}"

    return re.sub(r"(\benum\b\s*\w*\s*)\{([^{}]*)\}", repl, text)


def _clean_header(text: str) -> str:
    text = _strip_comments(text)
    text = _strip_preprocessor(text)
    text = re.sub(r'extern\s+"C"\s*\{', "", text)
    text = re.sub(r"__attribute__\s*\(\((?:[^()]|\([^()]*\))*\)\)", "", text)
    text = re.sub(r"\b__(?:INTRODUCED|DEPRECATED|NNAPI|REMOVED)\w*\s*\([^()]*\)", "", text)
    text = re.sub(r"\b(?:_Nonnull|_Nullable|_Null_unspecified|__restrict__|__restrict)\b",
                  "", text)
    return text


def build_cdef(header_text: str, extra_text: str = ""):
    """Return (cdef_text, enums) built from NeuralNetworks.h (+ nnapi_py.h functions)."""
    enums: dict = {}
    text = _rewrite_enums(_clean_header(header_text), enums)
    text = re.sub(r"\n\s*\n+", "\n", text).strip() + "\n"
    declared = set(re.findall(r"\b(\w+)\s*\(", text))
    extra = []
    if extra_text:
        ex = _clean_header(extra_text)
        for stmt in ex.split(";"):
            stmt = " ".join(stmt.split())
            m = re.match(r"^[\w\s\*]*?\b(nnapi_py_\w+)\s*\([^()]*\)$", stmt)
            if m and m.group(1) not in declared:
                extra.append(stmt + ";")
                declared.add(m.group(1))
    if "nnapi_py_last_error" not in declared:
        extra.append("const char* nnapi_py_last_error(void);")
    return text + "\n".join(extra) + "\n", enums


def header_paths():
    from . import include_dir
    inc = include_dir()
    return os.path.join(inc, "android", "NeuralNetworks.h"), os.path.join(inc, "nnapi_py.h")


def declared_ffi():
    """A cffi.FFI with NeuralNetworks.h and nnapi_py.h declared; (ffi, enums)."""
    import cffi
    header, extra = header_paths()
    with open(header) as f:
        htext = f.read()
    etext = open(extra).read() if os.path.exists(extra) else ""
    cdef, enums = build_cdef(htext, etext)
    ffi = cffi.FFI()
    ffi.cdef(cdef)
    return ffi, enums


def open_library(path=None):
    """(ffi, lib): the library at `path` (default: NNAPI_PY_LIB or nnapi_py.library_path()),
    every declared name resolved at once (resolve_all)."""
    from . import library_path
    ffi, _ = declared_ffi()
    env = None if path else os.environ.get("NNAPI_PY_LIB")
    try:
        lib = resolve_all(ffi.dlopen(path or env or library_path()))
        if env and not hasattr(lib, "ANeuralNetworksModel_create"):
            raise OSError("it exports no ANeuralNetworks* function")
        return ffi, lib
    except OSError as e:
        if not env:
            raise
        try:
            default = library_path()
        except FileNotFoundError:
            default = "the package's library"
        said = str(e).split(".  Additionally", 1)[0]
        raise OSError(f"NNAPI_PY_LIB={env!r}: cannot load it as libneuralnetworks.so ({said}); expected the path of a "
                      f"built library (unset it to use {default})") from None


def resolve_all(lib):
    """Look every declared function and constant up once, now.

    cffi's ABI-mode library object resolves a name on its first use under a non-reentrant
    lock; if garbage collection runs a finalizer during that first lookup and the finalizer
    uses another not-yet-resolved name (``lib.ANeuralNetworksModel_free`` in a ``__del__``),
    the thread waits for itself forever.  Resolved up front (about 2 ms), a lookup is a plain
    attribute read.  Names the library does not export stay lazy (and fail when used)."""
    for name in dir(lib):
        try:
            getattr(lib, name)
        except (AttributeError, NotImplementedError):
            pass
    return lib
