"""api/errors.toml, read and checked, and the Rust it generates.

gen_host_api.py writes the runtime's `ErrorKind` (runtime/src/error/kind.rs), the exception
classes of the Python extension (torch-ext/src/error/classes.rs), their stubs and docs/errors.md;
gen_c_api.py writes the C status codes (capi/src/status.rs, rshmem.h, docs/c-api.md). Each
mapping is written as a `match` naming every kind, without a fallback arm.
"""
from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TABLE = ROOT / "api" / "errors.toml"
OUT_KIND = ROOT / "runtime" / "src" / "error" / "kind.rs"
OUT_CLASSES = ROOT / "torch-ext" / "src" / "error" / "classes.rs"
OUT_STATUS = ROOT / "capi" / "src" / "status.rs"
ENUM_RS = ROOT / "runtime" / "src" / "error.rs"


class ErrorTableError(Exception):
    """api/errors.toml is malformed or disagrees with the runtime's `Error`."""


@dataclass(frozen=True)
class Code:
    name: str
    value: int
    doc: str

    @property
    def rust(self) -> str:
        """The Rust constant's name: RSHMEM_ERROR_BUSY -> BUSY, RSHMEM_SUCCESS -> SUCCESS."""
        return re.sub(r"^RSHMEM_(ERROR_)?", "", self.name)


@dataclass(frozen=True)
class Class:
    name: str
    parent: str | None
    builtin: str | None
    doc: str

    @property
    def bases(self) -> list[str]:
        return [b for b in (self.parent, self.builtin) if b] or ["Exception"]


@dataclass(frozen=True)
class Variant:
    name: str
    code: str
    klass: str
    note: str


@dataclass(frozen=True)
class Errors:
    codes: list[Code]
    classes: list[Class]
    variants: list[Variant]

    def code(self, name: str) -> Code:
        return next(c for c in self.codes if c.name == name)


def _text(row: dict, key: str, where: str) -> str:
    value = row.get(key)
    if not isinstance(value, str) or not value:
        raise ErrorTableError(f"api/errors.toml: {where} has no {key}")
    return value


def enum_variants() -> list[str]:
    """The variants of `pub enum Error` in runtime/src/error.rs, in order (the build checks the
    same through `Error::kind`'s match; this lets the generator say which row is missing)."""
    text = ENUM_RS.read_text()
    m = re.search(r"pub enum Error \{(.*?)\n\}", text, re.S)
    if m is None:
        raise ErrorTableError("runtime/src/error.rs: no `pub enum Error`")
    return re.findall(r"^    ([A-Z]\w*)\b", m.group(1), re.M)


def load() -> Errors:
    data = tomllib.loads(TABLE.read_text())
    codes = [Code(_text(r, "name", "a code"), r.get("value"), _text(r, "doc", f"code {r.get('name')}"))
             for r in data.get("code", [])]
    classes = [Class(_text(r, "name", "a class"), r.get("parent"), r.get("builtin"),
                     _text(r, "doc", f"class {r.get('name')}")) for r in data.get("class", [])]
    variants = [Variant(name, _text(r, "code", f"variant {name}"), _text(r, "class", f"variant {name}"), r.get("note", ""))
                for name, r in data.get("variant", {}).items()]
    problems = []
    for what, names in (("code", [c.name for c in codes]), ("code value", [c.value for c in codes]),
                        ("class", [c.name for c in classes])):
        dups = sorted({str(n) for n in names if names.count(n) > 1})
        if dups:
            problems.append(f"{what}s given twice: {dups}")
    if not codes or codes[0].name != "RSHMEM_SUCCESS" or codes[0].value != 0:
        problems.append("the first code must be RSHMEM_SUCCESS = 0")
    if any(not isinstance(c.value, int) for c in codes):
        problems.append("every code needs an integer value")
    seen: set[str] = set()
    for c in classes:
        if c.parent is not None and c.parent not in seen:
            problems.append(f"class {c.name}: parent {c.parent} is not a class listed before it")
        seen.add(c.name)
    if not classes or classes[0].parent is not None:
        problems.append("the first class must be the root (no parent)")
    code_names = {c.name for c in codes}
    for v in variants:
        if v.code not in code_names:
            problems.append(f"variant {v.name}: code {v.code} is not in the table")
        if v.code == "RSHMEM_SUCCESS":
            problems.append(f"variant {v.name}: an error cannot be RSHMEM_SUCCESS")
        if v.klass not in seen:
            problems.append(f"variant {v.name}: class {v.klass} is not in the table")
    in_enum = enum_variants()
    listed = [v.name for v in variants]
    if set(in_enum) - set(listed):
        problems.append(f"variants of runtime/src/error.rs's Error without a row: {sorted(set(in_enum) - set(listed))}")
    if set(listed) - set(in_enum):
        problems.append(f"rows naming no variant of Error: {sorted(set(listed) - set(in_enum))}")
    if problems:
        raise ErrorTableError("api/errors.toml: " + "; ".join(problems))
    return Errors(codes, classes, variants)


def _rs_str(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"')


def gen_kind_rs(errors: Errors, generated: str) -> str:
    """runtime/src/error/kind.rs: `ErrorKind` and `Error::kind`."""
    out = [f"// {generated}",
           "//! Which variant an [`Error`] is, as a plain value. The front ends key their status codes",
           "//! and exception classes (api/errors.toml) on it with matches that name every kind: `Error`",
           "//! is `#[non_exhaustive]` for other crates, `ErrorKind` is not, so a kind a front end does not",
           "//! map fails that front end's build, and a variant of `Error` the table lacks fails this one.",
           "",
           "use super::Error;",
           "",
           "/// The variant of an [`Error`], without its fields.",
           "#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]",
           "pub enum ErrorKind {"]
    for v in errors.variants:
        out += [f"    /// [`Error::{v.name}`].", f"    {v.name},"]
    out += ["}", "", "impl ErrorKind {", "    /// Every kind, in the order of `Error`'s variants.",
            "    pub const ALL: &'static [ErrorKind] = &["]
    out += [f"        ErrorKind::{v.name}," for v in errors.variants]
    out += ["    ];", "", "    /// The variant's name (\"Transport\").", "    pub fn name(self) -> &'static str {",
            "        match self {"]
    out += [f"            ErrorKind::{v.name} => \"{v.name}\"," for v in errors.variants]
    out += ["        }", "    }", "}", "", "impl Error {", "    /// Which variant this is.",
            "    pub fn kind(&self) -> ErrorKind {", "        match self {"]
    out += [f"            Error::{v.name} {{ .. }} => ErrorKind::{v.name}," for v in errors.variants]
    out += ["        }", "    }", "}", ""]
    return "\n".join(out)


def gen_classes_rs(errors: Errors, generated: str) -> str:
    """torch-ext/src/error/classes.rs: the exception hierarchy and each kind's class."""
    out = [f"// {generated}",
           "//! The exception classes of `rshmem` and the one each runtime error kind raises.",
           "",
           "use rshmem::ErrorKind;",
           "",
           "/// An exception class, by name: a class the table lacks is a compile error where it is raised.",
           "#[derive(Clone, Copy, Debug, PartialEq, Eq)]",
           "pub enum Name {"]
    for c in errors.classes:
        out += [f"    /// `rshmem.{c.name}`.", f"    {c.name},"]
    out += ["}", "", "impl Name {", "    /// The Python name.", "    pub fn as_str(self) -> &'static str {", "        match self {"]
    out += [f'            Name::{c.name} => "{c.name}",' for c in errors.classes]
    out += ["        }", "    }", "}", "",
           "/// One exception class: its name, its parent in this hierarchy (`None` for the root) and the",
           "/// builtin exception it also derives from, if any.",
           "pub struct Class {",
           "    /// The class name.",
           "    pub name: Name,",
           "    /// The parent class of this table.",
           "    pub parent: Option<Name>,",
           "    /// The builtin exception it also derives from.",
           "    pub builtin: Option<&'static str>,",
           "    /// Its docstring.",
           "    pub doc: &'static str,",
           "}",
           "",
           "/// The hierarchy, parents before children.",
           "pub const CLASSES: &[Class] = &["]

    def opt(s: str | None, quote: bool) -> str:
        return "None" if s is None else f'Some("{s}")' if quote else f"Some(Name::{s})"

    for c in errors.classes:
        out.append(f'    Class {{ name: Name::{c.name}, parent: {opt(c.parent, False)}, builtin: {opt(c.builtin, True)}, '
                   f'doc: "{_rs_str(c.doc)}" }},')
    out += ["];", "", "/// The class a runtime error of `kind` raises.", "pub fn of(kind: ErrorKind) -> Name {",
            "    match kind {"]
    out += [f"        ErrorKind::{v.name} => Name::{v.klass}," for v in errors.variants]
    out += ["    }", "}", ""]
    return "\n".join(out)


def gen_status_rs(errors: Errors, generated: str) -> str:
    """capi/src/status.rs: the status codes and each kind's code."""
    out = [f"// {generated}",
           "//! The status codes of the C ABI and the one each runtime error kind returns.",
           "",
           "use rshmem::ErrorKind;",
           "use std::ffi::c_int;",
           ""]
    for c in errors.codes:
        out += [f"/// `{c.name}`: {c.doc}", f"pub const {c.rust}: c_int = {c.value};"]
    out += ["", "/// Every code: its C name and value.", "pub const CODES: &[(&str, c_int)] = &["]
    out += [f'    ("{c.name}", {c.rust}),' for c in errors.codes]
    out += ["];", "", "/// The code a runtime error of `kind` returns.", "pub fn of(kind: ErrorKind) -> c_int {",
            "    match kind {"]
    out += [f"        ErrorKind::{v.name} => {errors.code(v.code).rust}," for v in errors.variants]
    out += ["    }", "}", ""]
    return "\n".join(out)


def variants_doc(errors: Errors) -> list[str]:
    """docs/errors.md's table of every runtime error: its C code and Python class."""
    out = ["## Each runtime error in C and Python", "",
           "Every variant of the runtime's `rshmem::Error` (Rust), the status code the C API returns for",
           "it and the class Python raises (`api/errors.toml`; the C program `capi/tests/error_codes.c`",
           "holds the C codes to this table).", "",
           "| `rshmem::Error` | C status | Python class | why |", "|---|---|---|---|"]
    out += [f"| `{v.name}` | `{v.code}` | `rshmem.{v.klass}` | {v.note} |" for v in errors.variants]
    out.append("")
    return out
