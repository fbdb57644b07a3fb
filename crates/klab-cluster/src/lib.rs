//! Composition root: builds the Router and in-process clients, starts components, applies faults.
