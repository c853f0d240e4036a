//! Python exceptions for `rshmem::Error`.
//!
//! Every runtime error becomes an instance of one class of a small hierarchy rooted at
//! `rshmem.RshmemError`; the message is the error's `Display` text, which already names the
//! values, the PE and what to do. Classes that describe a kind of misuse Python code already
//! catches also derive from the matching builtin (`PeOutOfRangeError` is an `IndexError`,
//! `InvalidArgumentError` a `ValueError`, ...), so `except IndexError` keeps working.
//!
//! The classes are built with `type(name, bases, dict)` at module load, because a class with two
//! bases cannot be declared with `create_exception!`.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};
use rshmem::Error;

/// One exception class: its name, its parent in this hierarchy (`None` for the root) and the
/// builtin exception it also derives from, if any.
struct Class {
    name: &'static str,
    parent: Option<&'static str>,
    builtin: Option<&'static str>,
    doc: &'static str,
}

/// The hierarchy, parents before children.
const CLASSES: &[Class] = &[
    Class { name: "RshmemError", parent: None, builtin: Some("RuntimeError"), doc: "Base class of every rshmem error." },
    Class { name: "NotInitializedError", parent: Some("RshmemError"), builtin: None, doc: "A call that needs the runtime came before rshmem.init(), after rshmem.finalize(), or in a process forked from a PE (a forked child is not a PE of its parent's job)." },
    Class { name: "AlreadyInitializedError", parent: Some("RshmemError"), builtin: None, doc: "rshmem.init() was called twice without rshmem.finalize() in between." },
    Class { name: "PeOutOfRangeError", parent: Some("RshmemError"), builtin: Some("IndexError"), doc: "A PE number outside the job or the team." },
    Class { name: "InvalidArgumentError", parent: Some("RshmemError"), builtin: Some("ValueError"), doc: "A bad argument (size, shape, operation, a read-only destination, ...)." },
    Class { name: "NotSymmetricError", parent: Some("InvalidArgumentError"), builtin: None, doc: "Memory that is not inside a live allocation of the symmetric heap (outside it, freed, or the runtime's own words)." },
    Class { name: "DTypeError", parent: Some("InvalidArgumentError"), builtin: Some("TypeError"), doc: "A dtype the operation does not take, or tensors of two dtypes in one typed copy (put, get) or collective; putmem / getmem copy bytes whatever the dtypes." },
    Class { name: "ConfigError", parent: Some("InvalidArgumentError"), builtin: None, doc: "A bad RSHMEM_* variable or init() option." },
    Class { name: "ArgumentTypeError", parent: Some("InvalidArgumentError"), builtin: Some("TypeError"), doc: "An argument of the wrong type (e.g. a float where a byte count goes)." },
    Class { name: "ArgumentRangeError", parent: Some("InvalidArgumentError"), builtin: Some("OverflowError"), doc: "An integer argument outside what the call takes (negative, or beyond 64 bits)." },
    Class { name: "HeapExhaustedError", parent: Some("RshmemError"), builtin: Some("MemoryError"), doc: "The symmetric heap would grow past RSHMEM_SYMMETRIC_SIZE." },
    Class { name: "MismatchError", parent: Some("RshmemError"), builtin: None, doc: "A collective call whose arguments differ between PEs, its symmetric buffers (dest, source) included." },
    Class { name: "PeerDiedError", parent: Some("RshmemError"), builtin: None, doc: "A peer process exited or its connection broke." },
    Class { name: "PeerExitedError", parent: Some("PeerDiedError"), builtin: None, doc: "A peer left the job (finalize, explicit or at exit after an exception or Ctrl-C) while this PE waited for it in a call the peer will never make." },
    Class { name: "TimeoutError", parent: Some("RshmemError"), builtin: Some("TimeoutError"), doc: "Something did not happen in time (bootstrap, or a wait under RSHMEM_DEBUG_WAIT_TIMEOUT_MS)." },
    Class { name: "BootstrapRefusedError", parent: Some("RshmemError"), builtin: Some("ConnectionError"), doc: "A bootstrap connection was refused: a PE of another job (launcher job id or RSHMEM_JOB_ID), of another PE count, with a secret where PE 0 has none or none where it has one (each naming both sides), or with a wrong secret." },
    Class { name: "UnsupportedError", parent: Some("RshmemError"), builtin: Some("NotImplementedError"), doc: "Something this build, backend or machine does not do." },
    Class { name: "OsError", parent: Some("RshmemError"), builtin: Some("OSError"), doc: "An operating-system call failed." },
    Class { name: "DriverError", parent: Some("RshmemError"), builtin: None, doc: "A CUDA driver call failed." },
    Class { name: "TransportError", parent: Some("RshmemError"), builtin: Some("ConnectionError"), doc: "A network-transport (UCX) call towards a PE on another host failed." },
];

/// The classes once built, in the order of [`CLASSES`].
static TYPES: PyOnceLock<Vec<Py<PyType>>> = PyOnceLock::new();

fn build(py: Python<'_>) -> PyResult<Vec<Py<PyType>>> {
    let builtins = py.import("builtins")?;
    let type_fn = builtins.getattr("type")?;
    let mut built: Vec<Py<PyType>> = Vec::with_capacity(CLASSES.len());
    for class in CLASSES {
        let mut bases: Vec<Bound<'_, PyAny>> = Vec::new();
        if let Some(parent) = class.parent {
            let i = CLASSES.iter().position(|c| c.name == parent).expect("parents come first");
            bases.push(built[i].bind(py).clone().into_any());
        }
        if let Some(builtin) = class.builtin {
            bases.push(builtins.getattr(builtin)?);
        }
        let dict = PyDict::new(py);
        dict.set_item("__doc__", class.doc)?;
        dict.set_item("__module__", "rshmem")?;
        let ty = type_fn.call1((class.name, PyTuple::new(py, bases)?, dict))?;
        built.push(ty.cast_into::<PyType>()?.unbind());
    }
    Ok(built)
}

fn class<'py>(py: Python<'py>, name: &str) -> Bound<'py, PyType> {
    let types = TYPES.get_or_try_init(py, || build(py)).expect("building the exception classes");
    let i = CLASSES.iter().position(|c| c.name == name).expect("a class of the table");
    types[i].bind(py).clone()
}

/// A Python exception of the class `name` (one of the table) with `message`.
pub fn new_err(name: &str, message: impl Into<String>) -> PyErr {
    let message = message.into();
    Python::attach(|py| PyErr::from_type(class(py, name), (message,)))
}

/// The class name for a runtime error.
fn class_name(err: &Error) -> &'static str {
    match err {
        Error::NotInitialized { .. } | Error::ForkedChild { .. } => "NotInitializedError",
        Error::AlreadyInitialized => "AlreadyInitializedError",
        Error::PeOutOfRange { .. } => "PeOutOfRangeError",
        Error::NotSymmetric { .. } | Error::NotAllocated { .. } => "NotSymmetricError",
        Error::HeapExhausted { .. } => "HeapExhaustedError",
        Error::Mismatch { .. } => "MismatchError",
        Error::PeerDied { .. } => "PeerDiedError",
        Error::PeerExited { .. } => "PeerExitedError",
        Error::Timeout { .. } | Error::WaitTimeout { .. } => "TimeoutError",
        Error::Refused { .. } => "BootstrapRefusedError",
        Error::InvalidArgument(_) => "InvalidArgumentError",
        Error::Config { .. } => "ConfigError",
        Error::Unsupported(_) => "UnsupportedError",
        Error::Os { .. } => "OsError",
        Error::Driver { .. } => "DriverError",
        Error::Transport { .. } => "TransportError",
        // `Error` is non-exhaustive: a variant added later is still an RshmemError.
        _ => "RshmemError",
    }
}

std::thread_local! {
    /// The exception a signal handler raised while this thread waited inside the runtime (see
    /// [`python_signals`]), raised in place of the runtime's `Interrupted` error.
    static PENDING: std::cell::RefCell<Option<PyErr>> = const { std::cell::RefCell::new(None) };
}

/// The runtime's interrupt hook: runs Python's pending signal handlers (Ctrl-C's raises
/// `KeyboardInterrupt`) from inside a wait that released the GIL; a handler's exception stops
/// the wait and is raised when the call returns. Handlers run on the main thread only, so
/// elsewhere this only costs taking the GIL, every 50 ms of waiting.
pub fn python_signals() -> bool {
    Python::try_attach(|py| py.check_signals()).is_some_and(|r| match r {
        Ok(()) => false,
        Err(e) => {
            PENDING.with(|p| *p.borrow_mut() = Some(e));
            true
        }
    })
}

/// Converts a runtime error into its Python exception.
pub fn to_py(err: Error) -> PyErr {
    if let Error::Interrupted { .. } = err {
        if let Some(raised) = PENDING.with(|p| p.borrow_mut().take()) {
            return raised;
        }
    }
    new_err(class_name(&err), err.to_string())
}

/// `?` for runtime results inside `#[pyfunction]`s.
pub trait IntoPy<T> {
    /// Maps the error with [`to_py`].
    fn py_err(self) -> PyResult<T>;
}

impl<T> IntoPy<T> for rshmem::Result<T> {
    fn py_err(self) -> PyResult<T> {
        self.map_err(to_py)
    }
}

/// Adds every class to the module, and installs the runtime's interrupt hook.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    rshmem::watchdog::set_interrupt_hook(Some(Box::new(python_signals)));
    let py = m.py();
    TYPES.get_or_try_init(py, || build(py))?;
    for c in CLASSES {
        m.add(c.name, class(py, c.name))?;
    }
    Ok(())
}
