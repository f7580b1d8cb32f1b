// This file is NOT part of the MCO. ocl-reconciler's test harness (tests/tools/mco/build.sh) copies
// it into the unpacked MCO tree as pkg/daemon/zz_ocl_verdict.go, so that it can reach the daemon's
// unexported update rules: what would the machine-config daemon do when a node moves from one
// rendered MachineConfig to another? Nothing here re-states a rule; every decision is the daemon's
// own function, called as pkg/daemon/update.go calls it in (*Daemon).update.

package daemon

import (
	"slices"

	mcfgv1 "github.com/openshift/api/machineconfiguration/v1"
	opv1 "github.com/openshift/api/operator/v1"

	ctrlcommon "github.com/openshift/machine-config-operator/pkg/controller/common"
)

// OCLVerdict is what the daemon would do for one update.
type OCLVerdict struct {
	// Rule: "nodeDisruptionPolicy" (calculatePostConfigChangeNodeDisruptionAction: what a running
	// node does) or "legacy" (calculatePostConfigChangeAction: the rule before node disruption
	// policies, still used on first boot).
	Rule string `json:"rule"`
	// Reboot is true when the node reboots.
	Reboot bool `json:"reboot"`
	// Actions: the node disruption actions (rule nodeDisruptionPolicy).
	Actions []opv1.NodeDisruptionPolicyStatusAction `json:"actions,omitempty"`
	// LegacyActions: "none", "reload crio", "restart crio" or "reboot" (rule legacy).
	LegacyActions []string `json:"legacyActions,omitempty"`
	// Drain: isDrainRequiredForNodeDisruptionActions / isDrainRequired.
	Drain bool `json:"drain"`
	// Diff: the fields of newMachineConfigDiff.
	Diff map[string]bool `json:"diff"`
	// Files: ctrlcommon.CalculateConfigFileDiffs; Units: every added, updated or removed unit.
	Files []string `json:"files"`
	Units []string `json:"units"`
	// Unreconcilable: the daemon's refusal (reconcilable()), empty when it would update.
	Unreconcilable string `json:"unreconcilable,omitempty"`
}

// OCLDecide runs the daemon's rule for oldConfig -> newConfig. policies is the cluster's
// MachineConfiguration `cluster` status.nodeDisruptionPolicyStatus.clusterPolicies (rule
// nodeDisruptionPolicy); legacy selects the rule before node disruption policies.
func OCLDecide(oldConfig, newConfig *mcfgv1.MachineConfig, policies opv1.NodeDisruptionPolicyClusterStatus, legacy bool) (*OCLVerdict, error) {
	oldIgn, err := ctrlcommon.ParseAndConvertConfig(oldConfig.Spec.Config.Raw)
	if err != nil {
		return nil, err
	}
	newIgn, err := ctrlcommon.ParseAndConvertConfig(newConfig.Spec.Config.Raw)
	if err != nil {
		return nil, err
	}
	v := &OCLVerdict{Rule: "nodeDisruptionPolicy", Files: []string{}, Units: []string{}}
	if legacy {
		v.Rule = "legacy"
	}
	// update.go: reconcilable() with no irreconcilable overrides, which builds the diff with
	// newMachineConfigDiff; where it refuses, the diff alone is still reported
	diff, rerr := reconcilable(oldConfig, newConfig, &opv1.IrreconcilableValidationOverrides{})
	if rerr != nil {
		v.Unreconcilable = rerr.Error()
		if diff, err = newMachineConfigDiff(oldConfig, newConfig); err != nil {
			return nil, err
		}
	}
	v.Diff = map[string]bool{
		"osUpdate": diff.osUpdate, "kargs": diff.kargs, "fips": diff.fips, "passwd": diff.passwd,
		"files": diff.files, "units": diff.units, "kernelType": diff.kernelType,
		"extensions": diff.extensions, "oclEnabled": diff.oclEnabled, "revertFromOCL": diff.revertFromOCL,
	}
	// update.go, (*Daemon).update: the file and unit sets
	diffFileSet := ctrlcommon.CalculateConfigFileDiffs(&oldIgn, &newIgn)
	unitDiff := ctrlcommon.GetChangedConfigUnitsByType(&oldIgn, &newIgn)
	var allChangedUnitNames []string
	for _, unit := range append(slices.Concat(unitDiff.Added, unitDiff.Updated), unitDiff.Removed...) {
		allChangedUnitNames = append(allChangedUnitNames, unit.Name)
	}
	v.Files = append(v.Files, diffFileSet...)
	v.Units = append(v.Units, allChangedUnitNames...)

	if legacy {
		// calculatePostConfigChangeAction, without its force-file check (no node here)
		if diff.osUpdate || diff.kargs || diff.fips || diff.units || diff.kernelType || diff.extensions {
			v.LegacyActions = []string{postConfigChangeActionReboot}
		} else {
			v.LegacyActions = calculatePostConfigChangeActionFromMCDiffs(diffFileSet)
		}
		v.Reboot = slices.Contains(v.LegacyActions, postConfigChangeActionReboot)
		v.Drain, err = isDrainRequired(v.LegacyActions, diffFileSet, oldIgn, newIgn)
		return v, err
	}
	// the prelude of (*Daemon).calculatePostConfigChangeNodeDisruptionAction (its wait for the
	// MachineConfiguration's observed generation is the caller's: the harness reads a status whose
	// generation is observed; the force file is not checked: no node here)
	switch {
	case diff.osUpdate || diff.kargs || diff.fips || diff.kernelType || diff.extensions:
		v.Actions = []opv1.NodeDisruptionPolicyStatusAction{{Type: opv1.RebootStatusAction}}
	case !diff.files && !diff.units && !diff.passwd:
		v.Actions = []opv1.NodeDisruptionPolicyStatusAction{{Type: opv1.NoneStatusAction}}
	default:
		v.Actions = calculatePostConfigChangeNodeDisruptionActionFromMCDiffs(diff.passwd, diffFileSet, allChangedUnitNames, policies)
	}
	for _, a := range v.Actions {
		if a.Type == opv1.RebootStatusAction {
			v.Reboot = true
		}
	}
	v.Drain, err = isDrainRequiredForNodeDisruptionActions(v.Actions, oldIgn, newIgn)
	return v, err
}
