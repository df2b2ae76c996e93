// Command manager runs the connector-mcp operator: it verifies McpServiceProfiles and activates
// ServiceDeployments only when the live MCP server matches the reviewed, signed snapshot.
//
// Metrics are served over HTTPS behind Kubernetes authentication and authorization (HTTP/2 off),
// probes on --health-probe-bind-address, and leader election keeps one active replica. On
// SIGTERM the manager cancels in-flight freezes and stops within --graceful-shutdown-timeout.
package main

import (
	"flag"
	"os"
	"time"

	"github.com/spf13/pflag"
	// Embedded CA roots: the image has no /etc/ssl, so TLS to registries and MCP servers falls
	// back to this bundle when the system has none.
	_ "golang.org/x/crypto/x509roots/fallback"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	v1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/appoptions"
	"github.com/b10x/connector-mcp/internal/managerapp"
	"github.com/b10x/connector-mcp/internal/tracing"
)

func main() {
	os.Exit(run())
}

func run() int {
	var (
		probeAddr, leaderNS string
		leaderElect         bool
		shutdownTimeout     time.Duration
		// Profiling endpoint.
		pprofAddr string
	)
	opts := managerapp.DefaultOptions()
	fs := pflag.CommandLine
	metrics := appoptions.DefaultMetrics(":8443")
	metrics.BindFlags(fs)
	fs.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "Address of the liveness and readiness probes.")
	fs.BoolVar(&leaderElect, "leader-elect", false, "Enable leader election so that only one replica is active.")
	fs.StringVar(&leaderNS, "leader-election-namespace", "", "Namespace of the leader election lease (default: the pod's namespace).")
	fs.DurationVar(&shutdownTimeout, "graceful-shutdown-timeout", 30*time.Second, "Time given to reconcilers to stop on shutdown.")
	// Profiling endpoint (off by default; see docs/operator.md "Sizing and sharding").
	fs.StringVar(&pprofAddr, "pprof-bind-address", "0", "Address of the net/http/pprof endpoint, unauthenticated: bind it to loopback and reach it with kubectl port-forward (\"0\" disables it).")
	opts.BindFlags(fs)
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	fs.AddGoFlagSet(flag.CommandLine)
	pflag.Parse()
	opts.ApplyEnvDefaults(fs, os.Getenv) // --verified-pack-namespace defaults to $POD_NAMESPACE
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	log := ctrl.Log.WithName("setup")
	// Traces (docs/observability.md): off unless OTEL_EXPORTER_OTLP_ENDPOINT is set.
	stopTracing, err := tracing.StartForBinary("connector-mcp-manager", log)
	if err != nil {
		log.Error(err, "Unable to set up tracing")
		return 1
	}
	defer stopTracing()

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		log.Error(err, "Unable to build the scheme")
		return 1
	}
	if err := v1.AddToScheme(scheme); err != nil {
		log.Error(err, "Unable to build the scheme")
		return 1
	}

	cfg, err := ctrl.GetConfig()
	if err != nil {
		log.Error(err, "Unable to load the kubeconfig")
		return 1
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        scheme,
		Metrics:                       metrics.ServerOptions(),
		WebhookServer:                 webhook.NewServer(webhook.Options{TLSOpts: metrics.TLSOpts()}),
		HealthProbeBindAddress:        probeAddr,
		Cache:                         managerapp.CacheOptions(),
		LeaderElection:                leaderElect,
		LeaderElectionID:              managerapp.LeaderElectionID(opts.WatchLabelSelector),
		LeaderElectionNamespace:       leaderNS,
		LeaderElectionReleaseOnCancel: true,
		GracefulShutdownTimeout:       &shutdownTimeout,
		PprofBindAddress:              pprofAddr,
	})
	if err != nil {
		log.Error(err, "Unable to create the manager")
		return 1
	}
	wired, err := managerapp.Setup(mgr, opts, true)
	if err != nil {
		log.Error(err, "Unable to set up the controllers")
		return 1
	}
	defer func() { _ = wired.Audit.Close() }()
	if wired.EphemeralCredentialHashKey {
		log.Info("No credential hash key file: using a random key, so deployments with a credential re-freeze once after each restart", "flag", "--credential-hash-key-file")
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		log.Error(err, "Unable to add the health check")
		return 1
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		log.Error(err, "Unable to add the readiness check")
		return 1
	}
	waived, _ := opts.WaivedChecks()
	log.Info("Starting the manager", "waivedChecks", waived, "allowLoopbackUnsafe", opts.AllowLoopbackUnsafe, "keylessTrustedRoot", opts.KeylessTrust().String())
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "The manager stopped with an error")
		return 1
	}
	return 0
}
