// SPDX-License-Identifier: GPL-2.0

//! Plugin arguments.

use crate::bts;
use crate::model::{self, Model};
use crate::stall;

/// Plugin arguments: `model=NAME` (required), `format=N`, `depth=N`, `timed=on|off` (Arch LBR),
/// `erratum1452=N` (LbrExtV2), `bts=on|off` (Intel: Branch Trace Store, on by default), `log=PATH`,
/// `trace=on|off`, `cost=on|off`, `hypervisor=kvm`, `bts_recent=N`, `stall=VCPU:ARM:RELEASE`.
///
/// `bts_recent=N` (0, the default: off; at most [`bts::RECENT_MAX`], 1048576): each vCPU keeps,
/// in the emulator and not in guest memory, the newest N BTS records it stored (from, to and the
/// flags quadword written), across recording periods and buffer swaps; every `freeze` event that
/// logs a `bts` object gives them in `bts.recent`, oldest first, each as
/// `["0xfrom", "0xto", "0xflags"]`, and `bts.recent_total`, the records this vCPU stored since
/// the emulator started (when it is at most N, `recent` holds them all). Records dropped (a full
/// buffer, an issue) or filtered out by ring are not stored, so not in it. Off: both are null.
///
/// `stall=VCPU:ARM:RELEASE`: vCPU VCPU's first freeze after the guest's marker ARM stalls it
/// until the guest's marker RELEASE ([`stall`]).
///
/// `save=PATH`, `load=PATH`: the emulator's state is saved at QEMU's exit, loaded at install
/// ([`crate::state`]).
pub struct Config {
    pub model: Model,
    /// `hypervisor=kvm`: the guest sees KVM's CPUID signature ([`model::Hypervisor`]).
    pub hypervisor: Option<model::Hypervisor>,
    pub log: Option<String>,
    pub trace: bool,
    pub cost: bool,
    /// `bts_recent=N`: the newest N stored BTS records kept per vCPU (0: off).
    pub bts_recent: usize,
    /// `stall=VCPU:ARM:RELEASE`.
    pub stall: Option<stall::Spec>,
    /// `save=PATH`, `load=PATH`.
    pub save: Option<String>,
    pub load: Option<String>,
    /// The arguments that shape the guest or the emulation (all but `log=`, `save=` and
    /// `load=`), as `key=value` with the last value of each key (the one that counts), sorted:
    /// a saved state is loaded only with the same.
    pub shaping: Vec<String>,
}

pub fn parse_args<'a>(args: impl IntoIterator<Item = &'a str>) -> Result<Config, String> {
    let mut model = None;
    let (mut format, mut depth, mut log, mut trace, mut cost) = (None, None, None, false, false);
    let (mut timed, mut erratum1452, mut bts) = (None, None, None);
    let mut hypervisor = None;
    let mut bts_recent = 0;
    let mut stall = None;
    let (mut save, mut load) = (None, None);
    let mut shaping = std::collections::BTreeMap::new();
    for arg in args {
        let (k, v) = arg
            .split_once('=')
            .ok_or_else(|| format!("argument {arg:?} is not key=value"))?;
        if !matches!(k, "log" | "save" | "load") {
            shaping.insert(k, v);
        }
        let on_off = |v: &str| match v {
            "on" => Ok(true),
            "off" => Ok(false),
            _ => Err(format!("{k}={v}: on or off")),
        };
        let num = |v: &str| {
            v.parse::<usize>()
                .map_err(|_| format!("{k}={v}: not a number"))
        };
        match k {
            "model" => {
                model = Some(model::find(v).ok_or_else(|| {
                    let names: Vec<_> = model::MODELS.iter().map(|m| m.name).collect();
                    format!("model={v}: unknown; models: {}", names.join(", "))
                })?)
            }
            "format" => format = Some(num(v)?),
            "depth" => depth = Some(num(v)?),
            "timed" => timed = Some(on_off(v)?),
            "erratum1452" => erratum1452 = Some(num(v)?),
            "bts" => bts = Some(on_off(v)?),
            "log" => log = Some(v.to_string()),
            "save" => save = Some(v.to_string()),
            "load" => load = Some(v.to_string()),
            "trace" => trace = on_off(v)?,
            "cost" => cost = on_off(v)?,
            "bts_recent" => {
                bts_recent = num(v)?;
                if bts_recent > bts::RECENT_MAX {
                    return Err(format!(
                        "{k}={v}: at most {} records per vCPU",
                        bts::RECENT_MAX
                    ));
                }
            }
            "stall" => stall = Some(stall::Spec::parse(v)?),
            "hypervisor" => match v {
                "kvm" => hypervisor = Some(model::Hypervisor::Kvm),
                _ => return Err(format!("hypervisor={v}: only kvm")),
            },
            _ => {
                return Err(format!(
                    "unknown argument {k:?} (model, format, depth, timed, erratum1452, bts, log, \
                     trace, cost, hypervisor, bts_recent, stall, save, load)"
                ))
            }
        }
    }
    let mut model = model.ok_or("model=NAME is required")?;
    if let Some(f) = format {
        model = model.with_format(u8::try_from(f).unwrap_or(u8::MAX))?;
    }
    if let Some(d) = depth {
        model = model.with_depth(d)?;
    }
    if let Some(t) = timed {
        model = model.with_timed(t)?;
    }
    if let Some(n) = erratum1452 {
        model = model.with_erratum1452(n)?;
    }
    if let Some(on) = bts {
        model = model.with_bts(on)?;
    }
    if hypervisor.is_some() {
        // KVM gives guests no BTS: IA32_MISC_ENABLE reads BTS_UNAVAIL (kvm_vcpu_reset() in
        // arch/x86/kvm/x86.c) and CPUID.1 DS / DTES64 only come with guest PEBS (vmx.c), which
        // the emulator does not have.
        if bts == Some(true) {
            return Err("bts=on: KVM gives guests no Branch Trace Store".into());
        }
        model = model.with_bts(false)?;
    }
    if hypervisor.is_some()
        && matches!(
            model.flavour,
            model::Flavour::Arch { .. } | model::Flavour::AmdV2 { .. }
        )
    {
        // arch/x86/kvm (7.3): no CPUID.(7,0):EDX[19] and no CPUID 0x80000022 EAX[1] for guests.
        return Err(format!(
            "hypervisor=kvm: KVM gives guests only legacy LBR and the AMD single record, not {}'s",
            model.name
        ));
    }
    if bts_recent > 0 && !model.has_bts() {
        return Err(format!(
            "bts_recent={bts_recent}: the {} model has no Branch Trace Store{}",
            model.name,
            if hypervisor.is_some() {
                " under hypervisor=kvm"
            } else if bts == Some(false) {
                " with bts=off"
            } else {
                ""
            }
        ));
    }
    Ok(Config {
        model,
        hypervisor,
        log,
        trace,
        cost,
        bts_recent,
        stall,
        save,
        load,
        shaping: shaping.iter().map(|(k, v)| format!("{k}={v}")).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn good_arguments() {
        let c = parse_args([
            "model=skylake",
            "format=6",
            "log=/tmp/x.jsonl",
            "trace=on",
            "cost=on",
        ])
        .unwrap();
        assert_eq!(c.model.perf_capabilities(), Some(6));
        assert_eq!(c.log.as_deref(), Some("/tmp/x.jsonl"));
        assert!(c.trace && c.cost);
        let c = parse_args(["model=sapphirerapids", "depth=64"]).unwrap();
        assert_eq!(
            c.model.flavour,
            model::Flavour::Arch {
                depth: 64,
                timed: true
            }
        );
        let c = parse_args(["model=sapphirerapids", "timed=off"]).unwrap();
        assert_eq!(
            c.model.flavour,
            model::Flavour::Arch {
                depth: 32,
                timed: false
            }
        );
        assert!(!parse_args(["model=skylake", "bts=off"])
            .unwrap()
            .model
            .has_bts());
        assert!(parse_args(["model=core2", "bts=on"])
            .unwrap()
            .model
            .has_bts());
        let c = parse_args(["model=skylake", "hypervisor=kvm"]).unwrap();
        assert_eq!(c.hypervisor, Some(model::Hypervisor::Kvm));
        assert!(!c.model.has_bts(), "KVM guests have no BTS");
        assert_eq!(parse_args(["model=amd"]).unwrap().hypervisor, None);
        assert_eq!(parse_args(["model=skylake"]).unwrap().bts_recent, 0);
        let c = parse_args(["model=skylake", "bts_recent=256"]).unwrap();
        assert_eq!(c.bts_recent, 256);
        assert_eq!(
            parse_args(["model=core2", "bts_recent=1048576"])
                .unwrap()
                .bts_recent,
            1 << 20
        );
        assert_eq!(
            parse_args(["model=amd", "bts_recent=0"])
                .unwrap()
                .bts_recent,
            0
        );
        assert_eq!(parse_args(["model=skylake"]).unwrap().stall, None);
        let c = parse_args(["model=skylake", "stall=1:7:8"]).unwrap();
        assert_eq!(
            c.stall,
            Some(stall::Spec {
                cpu: 1,
                arm: 7,
                release: 8
            })
        );
        let c = parse_args([
            "trace=on",
            "save=/s",
            "model=skylake",
            "log=/l",
            "load=/t",
            "trace=off",
        ])
        .unwrap();
        assert_eq!(
            (c.save.as_deref(), c.load.as_deref()),
            (Some("/s"), Some("/t"))
        );
        assert_eq!(c.shaping, ["model=skylake", "trace=off"]);
        let c = parse_args(["model=zen4", "erratum1452=3"]).unwrap();
        assert_eq!(
            c.model.flavour,
            model::Flavour::AmdV2 {
                depth: 16,
                erratum1452: Some(3)
            }
        );
    }

    #[test]
    fn bad_arguments_are_named() {
        for (args, msg) in [
            (&["format=3"][..], "model=NAME is required"),
            (&["model=pentium"], "model=pentium: unknown; models: core2"),
            (
                &["model=skylake", "format=8"],
                "format=8: LBR formats are 0-7",
            ),
            (&["model=skylake", "format=x"], "format=x: not a number"),
            (
                &["model=zen4", "format=3"],
                "format= applies to Intel legacy LBR models",
            ),
            (
                &["model=skylake", "depth=16"],
                "depth= applies to Arch LBR models",
            ),
            (
                &["model=skylake", "colour=red"],
                "unknown argument \"colour\"",
            ),
            (&["model"], "argument \"model\" is not key=value"),
            (&["model=skylake", "trace=yes"], "trace=yes: on or off"),
            (
                &["model=skylake", "stall=1:2"],
                "stall=1:2: VCPU:ARM:RELEASE, three numbers",
            ),
            (
                &["model=skylake", "stall=1:2:2"],
                "stall=1:2:2: the arming and releasing markers must differ",
            ),
            (&["model=skylake", "cost=1"], "cost=1: on or off"),
            (
                &["model=skylake", "hypervisor=xen"],
                "hypervisor=xen: only kvm",
            ),
            (
                &["model=sapphirerapids", "hypervisor=kvm"],
                "hypervisor=kvm: KVM gives guests only legacy LBR",
            ),
            (
                &["model=zen4", "hypervisor=kvm"],
                "hypervisor=kvm: KVM gives guests only legacy LBR",
            ),
            (&["model=skylake", "bts=yes"], "bts=yes: on or off"),
            (&["model=amd", "bts=on"], "bts=on: amd is an AMD model"),
            (
                &["model=skylake", "hypervisor=kvm", "bts=on"],
                "bts=on: KVM gives guests no Branch Trace Store",
            ),
            (
                &["model=skylake", "bts_recent=-1"],
                "bts_recent=-1: not a number",
            ),
            (
                &["model=skylake", "bts_recent=1048577"],
                "bts_recent=1048577: at most 1048576 records per vCPU",
            ),
            (
                &["model=zen4", "bts_recent=8"],
                "bts_recent=8: the zen4 model has no Branch Trace Store",
            ),
            (
                &["model=skylake", "bts=off", "bts_recent=8"],
                "bts_recent=8: the skylake model has no Branch Trace Store with bts=off",
            ),
            (
                &["model=skylake", "hypervisor=kvm", "bts_recent=8"],
                "bts_recent=8: the skylake model has no Branch Trace Store under hypervisor=kvm",
            ),
            (
                &["model=skylake", "timed=off"],
                "timed= applies to Arch LBR models",
            ),
            (
                &["model=sapphirerapids", "erratum1452=2"],
                "erratum1452= applies to AMD LbrExtV2 models",
            ),
            (
                &["model=zen4", "erratum1452=0"],
                "erratum1452=0: N is 1 or more",
            ),
        ] {
            let err = parse_args(args.iter().copied()).err().unwrap();
            assert!(err.starts_with(msg), "{args:?}: {err}");
        }
    }
}
