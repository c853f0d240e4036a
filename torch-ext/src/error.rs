//! Python exceptions for `rshmem::Error`.
//!
//! Every runtime error becomes an instance of one class of a small hierarchy rooted at
//! `rshmem.RshmemError`; the message is the error's `Display` text, which already names the
//! values, the PE and what to do. Classes that describe a kind of misuse Python code already
//! catches also derive from the matching builtin (`PeOutOfRangeError` is an `IndexError`,
//! `InvalidArgumentError` a `ValueError`, ...), so `except IndexError` keeps working.
//!
//! The classes and the one each runtime error raises are rows of `api/errors.toml`, generated
//! into `error/classes.rs`. They are built with `type(name, bases, dict)` at module load, because
//! a class with two bases cannot be declared with `create_exception!`.

mod classes;

pub use classes::Name;
use classes::CLASSES;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};
use rshmem::Error;

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
        let ty = type_fn.call1((class.name.as_str(), PyTuple::new(py, bases)?, dict))?;
        built.push(ty.cast_into::<PyType>()?.unbind());
    }
    Ok(built)
}

fn class<'py>(py: Python<'py>, name: Name) -> Bound<'py, PyType> {
    let types = TYPES.get_or_try_init(py, || build(py)).expect("building the exception classes");
    let i = CLASSES.iter().position(|c| c.name == name).expect("a class of the table");
    types[i].bind(py).clone()
}

/// A Python exception of the class `name` with `message`.
pub fn new_err(name: Name, message: impl Into<String>) -> PyErr {
    let message = message.into();
    Python::attach(|py| PyErr::from_type(class(py, name), (message,)))
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
    new_err(classes::of(err.kind()), err.to_string())
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
        m.add(c.name.as_str(), class(py, c.name))?;
    }
    Ok(())
}
