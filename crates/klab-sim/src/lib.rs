//! klab sim: scenario files, the virtual-time runner, traces and expectations.
