//! The device state: the one struct device code reads.
