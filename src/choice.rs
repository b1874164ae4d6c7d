//! Values spelled as one of a few names: the enumerated inputs (`backend`, `compression`, …)
//! and settings read from the environment. Each enum lists its values and names each one
//! ([`Named`]); [`parse`] is the one rule for reading them: surrounding whitespace is ignored
//! and ASCII case is not significant (`GitHub` is `github`). Nothing else is accepted.

/// An enum whose values are chosen by name.
pub trait Named: Copy + PartialEq + 'static {
    /// Every value, in the order documentation and messages list them.
    const ALL: &'static [Self];

    /// How the value is spelled in inputs, documentation and messages (lowercase).
    fn name(self) -> &'static str;
}

/// Declares an enum whose values are chosen by name, each variant with its name
/// (`Off => "off"`): its `name()` (also as [`Named`] and `Display`), and [`Named::ALL`] in
/// the order given.
macro_rules! named_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $($(#[$variant_meta:meta])* $variant:ident => $text:literal),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis enum $name {
            $($(#[$variant_meta])* $variant),+
        }

        impl $name {
            pub const fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $text),+
                }
            }
        }

        impl $crate::choice::Named for $name {
            const ALL: &'static [Self] = &[$($name::$variant),+];

            fn name(self) -> &'static str {
                $name::name(self)
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}
pub(crate) use named_enum;

named_enum! {
    /// A setting that is on, off, or decided by its context (`grow`, `explain-misses`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Switch {
        Auto => "auto",
        True => "true",
        False => "false",
    }
}

impl Switch {
    /// On or off, with `auto` decided by `auto`.
    pub fn or_auto(self, auto: bool) -> bool {
        match self {
            Switch::Auto => auto,
            Switch::True => true,
            Switch::False => false,
        }
    }

    /// `None` for `auto`.
    pub fn decided(self) -> Option<bool> {
        match self {
            Switch::Auto => None,
            Switch::True => Some(true),
            Switch::False => Some(false),
        }
    }
}

/// The value named `s`, if any.
pub fn parse<T: Named>(s: &str) -> Option<T> {
    let s = s.trim();
    T::ALL.iter().copied().find(|value| value.name().eq_ignore_ascii_case(s))
}

/// The accepted names for messages: `` `a`, `b`, `c` ``.
pub fn names<T: Named>() -> String {
    T::ALL.iter().map(|value| format!("`{}`", value.name())).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    named_enum! {
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        enum Level {
            /// Documented variants keep their docs.
            Low => "low",
            High => "high-ish",
        }
    }

    #[test]
    fn named_enum_lists_names_in_order_and_displays_them() {
        assert_eq!(<Level as Named>::ALL, &[Level::Low, Level::High]);
        assert_eq!((Level::High.name(), Level::High.to_string()), ("high-ish", "high-ish".to_owned()));
        assert_eq!(parse::<Level>(" HIGH-ISH "), Some(Level::High));
        assert_eq!(names::<Level>(), "`low`, `high-ish`");
    }

    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum Mode {
        Off,
        CpuFlags,
    }

    impl Named for Mode {
        const ALL: &'static [Self] = &[Mode::Off, Mode::CpuFlags];
        fn name(self) -> &'static str {
            match self {
                Mode::Off => "off",
                Mode::CpuFlags => "cpu-flags",
            }
        }
    }

    #[test]
    fn names_are_read_case_insensitively_and_nothing_else_is_accepted() {
        assert_eq!(parse("off"), Some(Mode::Off));
        assert_eq!(parse(" OFF\n"), Some(Mode::Off));
        assert_eq!(parse("Cpu-Flags"), Some(Mode::CpuFlags));
        assert_eq!(parse::<Mode>("cpu_flags"), None);
        assert_eq!(parse::<Mode>("false"), None);
        assert_eq!(parse::<Mode>(""), None);
        assert_eq!(names::<Mode>(), "`off`, `cpu-flags`");
    }
}
