// ocl-mco-harness: ocl-reconciler's test harness around the Machine Config Operator's own code. It is
// NOT part of the MCO: tests/tools/mco/build.sh copies it into the unpacked MCO source
// (../shared/mco/mco-src.tar.gz) as cmd/ocl-mco-harness and builds it offline, with the version hash
// set by -ldflags -X. Usage: `ocl-mco-harness help`.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	features "github.com/openshift/api/features"
	mcfgv1 "github.com/openshift/api/machineconfiguration/v1"
	opv1 "github.com/openshift/api/operator/v1"
	configinformers "github.com/openshift/client-go/config/informers/externalversions"
	mcfginformers "github.com/openshift/client-go/machineconfiguration/informers/externalversions"
	operatorinformers "github.com/openshift/client-go/operator/informers/externalversions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	"github.com/openshift/machine-config-operator/internal/clients"
	"github.com/openshift/machine-config-operator/pkg/apihelpers"
	ctrlcommon "github.com/openshift/machine-config-operator/pkg/controller/common"
	"github.com/openshift/machine-config-operator/pkg/controller/node"
	"github.com/openshift/machine-config-operator/pkg/controller/render"
	"github.com/openshift/machine-config-operator/pkg/daemon"
	"github.com/openshift/machine-config-operator/pkg/version"
)

const usage = `ocl-mco-harness: the MCO's own render and node controllers, and its daemon's reboot rule,
for ocl-reconciler's tests (built by tests/tools/mco/build.sh; not part of the MCO).

Commands:
  run --kubeconfig FILE [--update-delay 200ms] [--feature-set Default] [--workers 2] [-v N]
      Runs the real render controller (render.New) and node controller
      (node.NewWithCustomUpdateDelay) against the API server of FILE, wired as
      cmd/machine-config-controller/start.go wires them, until SIGTERM or SIGINT (exit 0).
      Differences from the real machine-config-controller: no leader election, no other
      controller (template, kubelet-config, container-runtime-config, drain, osimagestream...),
      feature gates hard-coded from the vendored openshift/api for --feature-set
      (NewFeatureGatesHardcodedHandler), and a nil images inspector factory: the render
      controller inspects no image (no OS stream discovery from image labels).
      The controllers log with klog to stderr; they are ready once both have logged
      "Starting MachineConfigController-RenderController" / "...-NodeController".

  verdict --old FILE --new FILE [--policies FILE | --kubeconfig FILE | --default-policies]
          [--rule nodeDisruptionPolicy|legacy]
  verdict --pairs FILE|- [same policy and rule flags]
      What the machine-config daemon would do when a node moves from the rendered
      MachineConfig in --old to the one in --new (JSON or YAML objects). The daemon's own
      functions decide (pkg/daemon/update.go): reconcilable(), newMachineConfigDiff, the file
      and unit sets as (*Daemon).update builds them, then
        rule nodeDisruptionPolicy (default; a running node): the prelude of
          calculatePostConfigChangeNodeDisruptionAction (osImageURL, kargs, fips, kernelType,
          extensions => Reboot; no file, unit or passwd change => None), else
          calculatePostConfigChangeNodeDisruptionActionFromMCDiffs with the cluster's policies;
        rule legacy (first boot, and clusters before node disruption policies):
          calculatePostConfigChangeAction / calculatePostConfigChangeActionFromMCDiffs.
      The policies: status.nodeDisruptionPolicyStatus.clusterPolicies of the MachineConfiguration
      "cluster" in --policies (a file) or read from --kubeconfig; its metadata.generation must
      equal status.observedGeneration, as the daemon waits for; --default-policies uses
      apihelpers.MergeClusterPolicies of an empty spec (the MCO's built-in policies).
      --pairs reads a JSON list of {"old": MachineConfig, "new": MachineConfig} and prints a
      list. Prints JSON: {"rule", "reboot", "actions" | "legacyActions", "drain", "diff",
      "files", "units", "unreconcilable"}. The daemon's force file is never consulted.

  policies [--spec FILE]
      Prints the node disruption policies as the operator writes them into MachineConfiguration
      "cluster" status.nodeDisruptionPolicyStatus.clusterPolicies (apihelpers.MergeClusterPolicies):
      the MCO's built-in ones merged with the spec.nodeDisruptionPolicy in FILE (JSON or YAML
      NodeDisruptionPolicyConfig; none: an empty spec).

  version
      Prints {"hash": pkg/version.Hash, "raw": pkg/version.Raw, "renderDelay": seconds} as this binary
      was built (renderDelay: the render controller's wait, set by build.sh; 5 upstream): the
      OSImageStream "cluster" must carry the hash as machineconfiguration.openshift.io/release-image-version
      and MCO-generated MachineConfigs as generated-by-controller-version; the ControllerConfig
      carries raw as machineconfiguration.openshift.io/generated-by-version.

Exit codes: 0 done, 1 error (one line on stderr), 2 usage.
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "run":
		err = runCmd(os.Args[2:])
	case "verdict":
		err = verdictCmd(os.Args[2:], os.Stdin, os.Stdout)
	case "version":
		err = json.NewEncoder(os.Stdout).Encode(map[string]string{"hash": version.Hash, "raw": version.Raw,
			"renderDelay": fmt.Sprintf("%g", render.OclRenderDelay().Seconds())})
	case "policies":
		err = policiesCmd(os.Args[2:])
	case "help", "-h", "--help":
		fmt.Print(usage)
	default:
		fmt.Fprintf(os.Stderr, "error: unknown command %q\n\n%s", os.Args[1], usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
		var u usageError
		if asUsage(err, &u) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

type usageError struct{ msg string }

func (u usageError) Error() string { return u.msg }

func asUsage(err error, u *usageError) bool {
	v, ok := err.(usageError)
	if ok {
		*u = v
	}
	return ok
}

func parse(fs *flag.FlagSet, args []string) error {
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		return usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	}
	return nil
}

// featureGates: every gate of the vendored openshift/api for a self-managed cluster's feature set,
// enabled or disabled, as the FeatureGate `cluster` of that set would list them.
func featureGates(set string) (enabled, disabled []configv1.FeatureGateName, err error) {
	fs := configv1.FeatureSet(set)
	if set == "Default" {
		fs = configv1.Default
	}
	gates := features.FeatureSets(4, features.SelfManaged, fs)
	if gates == nil || len(gates.Enabled)+len(gates.Disabled) == 0 {
		return nil, nil, usageError{fmt.Sprintf("unknown feature set %q", set)}
	}
	for _, g := range gates.Enabled {
		enabled = append(enabled, g.FeatureGateAttributes.Name)
	}
	for _, g := range gates.Disabled {
		disabled = append(disabled, g.FeatureGateAttributes.Name)
	}
	return enabled, disabled, nil
}

func runCmd(args []string) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig of the API server")
	delay := fs.Duration("update-delay", 200*time.Millisecond, "the node controller's update delay (the MCO's: 5s)")
	featureSet := fs.String("feature-set", "Default", "the feature set whose gates are hard-coded")
	workers := fs.Int("workers", 2, "workers per controller (start.go: 2)")
	statusAddr := fs.String("status-addr", "127.0.0.1:0", "where GET /queues says whether both controllers' queues are idle (queues.go)")
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	verbosity := fs.String("v", "2", "klog verbosity")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *kubeconfig == "" {
		return usageError{"run needs --kubeconfig"}
	}
	_ = klogFlags.Set("v", *verbosity)
	_ = klogFlags.Set("logtostderr", "true")
	enabled, disabled, err := featureGates(*featureSet)
	if err != nil {
		return err
	}
	klog.Infof("ocl-mco-harness: MCO %s (%s), feature set %s", version.Raw, version.Hash, *featureSet)

	// before the controllers make their queues: SetProvider holds only for queues made after it
	status := newQueues(map[string]time.Duration{
		"machineconfigcontroller-rendercontroller": render.OclRenderDelay(),
		"machineconfigcontroller-nodecontroller":   *delay,
	})
	workqueue.SetProvider(status)
	if err := status.serve(*statusAddr); err != nil {
		return fmt.Errorf("--status-addr: %w", err)
	}

	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()

	cb, err := clients.NewBuilder(*kubeconfig)
	if err != nil {
		return fmt.Errorf("creating clients: %w", err)
	}
	const agent = "ocl-mco-harness"
	kubeClient := cb.KubeClientOrDie(agent)
	mcfgClient := cb.MachineConfigClientOrDie(agent)
	resync := ctrlcommon.DefaultResyncPeriod()
	// the factories of ctrlcommon.CreateControllerContext that render and node use
	informerFactory := mcfginformers.NewSharedInformerFactory(mcfgClient, resync())
	oclInformerFactory := mcfginformers.NewSharedInformerFactory(mcfgClient, resync())
	kubeInformerFactory := informers.NewSharedInformerFactory(kubeClient, resync())
	openShiftConfigKube := informers.NewSharedInformerFactoryWithOptions(kubeClient, resync(),
		informers.WithNamespace(ctrlcommon.OpenshiftConfigNamespace))
	mcoPodInformerFactory := informers.NewSharedInformerFactoryWithOptions(kubeClient, resync(),
		informers.WithNamespace(ctrlcommon.MCONamespace),
		informers.WithTweakListOptions(func(opt *metav1.ListOptions) {
			opt.LabelSelector = labels.Set{"k8s-app": "machine-config-operator"}.String()
		}))
	configInformerFactory := configinformers.NewSharedInformerFactory(cb.ConfigClientOrDie(agent), resync())
	operatorInformerFactory := operatorinformers.NewSharedInformerFactory(cb.OperatorClientOrDie(agent), resync())
	fgHandler := ctrlcommon.NewFeatureGatesHardcodedHandler(enabled, disabled)

	// createControllers in cmd/machine-config-controller/start.go, with a nil images inspector
	// factory: the render controller then inspects no image and waits for no Secret, ICSP, IDMS,
	// ITMS or Image informer
	renderCtrl := render.New(
		informerFactory.Machineconfiguration().V1().MachineConfigPools(),
		informerFactory.Machineconfiguration().V1().MachineConfigs(),
		informerFactory.Machineconfiguration().V1().ControllerConfigs(),
		informerFactory.Machineconfiguration().V1().ContainerRuntimeConfigs(),
		informerFactory.Machineconfiguration().V1().KubeletConfigs(),
		operatorInformerFactory.Operator().V1().MachineConfigurations(),
		informerFactory.Machineconfiguration().V1().OSImageStreams(),
		openShiftConfigKube.Core().V1().Secrets(),
		operatorInformerFactory.Operator().V1alpha1().ImageContentSourcePolicies(),
		configInformerFactory.Config().V1().ImageDigestMirrorSets(),
		configInformerFactory.Config().V1().ImageTagMirrorSets(),
		configInformerFactory.Config().V1().Images(),
		cb.KubeClientOrDie("render-controller"),
		cb.MachineConfigClientOrDie("render-controller"),
		fgHandler,
		nil,
	)
	nodeCtrl := node.NewWithCustomUpdateDelay(
		informerFactory.Machineconfiguration().V1().ControllerConfigs(),
		informerFactory.Machineconfiguration().V1().MachineConfigs(),
		informerFactory.Machineconfiguration().V1().MachineConfigPools(),
		kubeInformerFactory.Core().V1().Nodes(),
		mcoPodInformerFactory.Core().V1().Pods(),
		oclInformerFactory.Machineconfiguration().V1().MachineOSConfigs(),
		oclInformerFactory.Machineconfiguration().V1().MachineOSBuilds(),
		informerFactory.Machineconfiguration().V1().MachineConfigNodes(),
		configInformerFactory.Config().V1().Schedulers(),
		operatorInformerFactory.Operator().V1().MachineConfigurations(),
		informerFactory.Machineconfiguration().V1().OSImageStreams(),
		configInformerFactory.Config().V1().Infrastructures(),
		cb.KubeClientOrDie("node-update-controller"),
		cb.MachineConfigClientOrDie("node-update-controller"),
		*delay,
		fgHandler,
	)
	for _, f := range []interface{ Start(<-chan struct{}) }{informerFactory, oclInformerFactory,
		kubeInformerFactory, openShiftConfigKube, mcoPodInformerFactory, configInformerFactory, operatorInformerFactory} {
		f.Start(ctx.Done())
	}
	go renderCtrl.Run(ctx, *workers)
	go nodeCtrl.Run(ctx, *workers)
	<-ctx.Done()
	klog.Infof("ocl-mco-harness: stopping")
	time.Sleep(100 * time.Millisecond) // the controllers' deferred queue shutdowns
	klog.Flush()
	return nil
}

func policiesCmd(args []string) error {
	fs := flag.NewFlagSet("policies", flag.ContinueOnError)
	specPath := fs.String("spec", "", "an administrator's spec.nodeDisruptionPolicy (file)")
	if err := parse(fs, args); err != nil {
		return err
	}
	var spec opv1.NodeDisruptionPolicyConfig
	if *specPath != "" {
		if err := readObject(*specPath, &spec); err != nil {
			return err
		}
	}
	return json.NewEncoder(os.Stdout).Encode(apihelpers.MergeClusterPolicies(spec))
}

func readObject(path string, into any) error {
	var data []byte
	var err error
	if path == "-" {
		data, err = io.ReadAll(os.Stdin)
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return err
	}
	if err := yaml.Unmarshal(data, into); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

func policiesOf(mcop *opv1.MachineConfiguration, where string) (opv1.NodeDisruptionPolicyClusterStatus, error) {
	// calculatePostConfigChangeNodeDisruptionAction waits until the status is observed
	if mcop.Generation != mcop.Status.ObservedGeneration {
		return opv1.NodeDisruptionPolicyClusterStatus{}, fmt.Errorf(
			"%s: NodeDisruptionPolicyStatus is not up to date (generation %d, observed %d)",
			where, mcop.Generation, mcop.Status.ObservedGeneration)
	}
	return mcop.Status.NodeDisruptionPolicyStatus.ClusterPolicies, nil
}

type pair struct {
	Old *mcfgv1.MachineConfig `json:"old"`
	New *mcfgv1.MachineConfig `json:"new"`
}

func verdictCmd(args []string, _ io.Reader, out io.Writer) error {
	fs := flag.NewFlagSet("verdict", flag.ContinueOnError)
	oldPath := fs.String("old", "", "the rendered MachineConfig the node is on")
	newPath := fs.String("new", "", "the rendered MachineConfig it moves to")
	pairsPath := fs.String("pairs", "", "a JSON list of {old, new}")
	policiesPath := fs.String("policies", "", "the MachineConfiguration `cluster` (file)")
	kubeconfig := fs.String("kubeconfig", "", "read the MachineConfiguration `cluster` from this cluster")
	defaults := fs.Bool("default-policies", false, "the MCO's built-in node disruption policies")
	rule := fs.String("rule", "nodeDisruptionPolicy", "nodeDisruptionPolicy or legacy")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *rule != "nodeDisruptionPolicy" && *rule != "legacy" {
		return usageError{fmt.Sprintf("--rule is nodeDisruptionPolicy or legacy, not %q", *rule)}
	}
	if (*pairsPath == "") == (*oldPath == "" || *newPath == "") {
		return usageError{"verdict needs --old and --new, or --pairs"}
	}
	sources := 0
	for _, set := range []bool{*policiesPath != "", *kubeconfig != "", *defaults} {
		if set {
			sources++
		}
	}
	legacy := *rule == "legacy"
	if sources > 1 || (sources == 0 && !legacy) {
		return usageError{"give exactly one of --policies, --kubeconfig, --default-policies (rule legacy needs none)"}
	}
	var policies opv1.NodeDisruptionPolicyClusterStatus
	switch {
	case *policiesPath != "":
		mcop := &opv1.MachineConfiguration{}
		if err := readObject(*policiesPath, mcop); err != nil {
			return err
		}
		p, err := policiesOf(mcop, *policiesPath)
		if err != nil {
			return err
		}
		policies = p
	case *kubeconfig != "":
		cb, err := clients.NewBuilder(*kubeconfig)
		if err != nil {
			return err
		}
		mcop, err := cb.OperatorClientOrDie("ocl-mco-harness").OperatorV1().MachineConfigurations().Get(
			context.TODO(), ctrlcommon.MCOOperatorKnobsObjectName, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("MachineConfiguration/%s: %w", ctrlcommon.MCOOperatorKnobsObjectName, err)
		}
		p, err := policiesOf(mcop, "MachineConfiguration/cluster")
		if err != nil {
			return err
		}
		policies = p
	case *defaults:
		policies = apihelpers.MergeClusterPolicies(opv1.NodeDisruptionPolicyConfig{})
	}
	var pairs []pair
	if *pairsPath != "" {
		if err := readObject(*pairsPath, &pairs); err != nil {
			return err
		}
	} else {
		p := pair{Old: &mcfgv1.MachineConfig{}, New: &mcfgv1.MachineConfig{}}
		if err := readObject(*oldPath, p.Old); err != nil {
			return err
		}
		if err := readObject(*newPath, p.New); err != nil {
			return err
		}
		pairs = []pair{p}
	}
	verdicts := make([]*daemon.OCLVerdict, 0, len(pairs))
	for i, p := range pairs {
		if p.Old == nil || p.New == nil {
			return fmt.Errorf("pair %d: needs old and new", i)
		}
		v, err := daemon.OCLDecide(p.Old, p.New, policies, legacy)
		if err != nil {
			return fmt.Errorf("%s -> %s: %w", p.Old.Name, p.New.Name, err)
		}
		verdicts = append(verdicts, v)
	}
	enc := json.NewEncoder(out)
	if *pairsPath != "" {
		return enc.Encode(verdicts)
	}
	return enc.Encode(verdicts[0])
}
