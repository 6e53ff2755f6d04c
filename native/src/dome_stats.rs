//! The DOME engine's counters, `parsers/dome_reassembly.DomeStats` by name and order, and
//! `counters!`, which makes such a struct (the checksum stage's: dome_checksums.rs).

/// A struct of i64 counters with their names in order (a Python dataclass's fields).
macro_rules! counters {
    ($struct:ident; $($name:ident),* $(,)?) => {
        #[derive(Default, Clone, Debug, PartialEq, Eq)]
        pub struct $struct {
            $(pub $name: i64,)*
        }

        impl $struct {
            pub const NAMES: &'static [&'static str] = &[$(stringify!($name)),*];

            pub fn values(&self) -> Vec<i64> {
                vec![$(self.$name),*]
            }

            /// Set a counter by name; false for a name this engine does not know.
            pub fn set(&mut self, name: &str, value: i64) -> bool {
                match name {
                    $(stringify!($name) => { self.$name = value; true })*
                    _ => false,
                }
            }
        }
    };
}
pub(crate) use counters;

counters!(DomeStats;
    lines, calls, cut_calls, stray_call_ends, commands_without_call, expired_calls, call_evictions,
    process_deaths, puts, puts_joined, expired_puts, put_evictions, orphan_putdones, putcount_joins,
    ambiguous_putdones, repeated_putdones, orphan_putdone_errors, unframed_lines, unusable_lines,
    capacity, fs_events, journald_suppressed_lines,
);
