// Command gateway serves the reviewed operations of activated ServiceDeployments to workloads
// over MCP (Streamable HTTP): /mcp/{namespace}/{servicedeployment} lists and calls one
// deployment's operations as tools, /mcp offers search_operations, describe_operation and
// invoke_operation. Callers authenticate with a ServiceAccount token for --audience and are
// authorized with the SubjectAccessReview "invoke servicedeployments/NAME". Profiles are verified
// with the manager's trust policy (the same trust and egress flags). Stateless: run any number of
// replicas. See docs/gateway.md.
package main

import (
	"context"
	"flag"
	"net"
	"os"
	"time"

	"github.com/spf13/pflag"
	// The public CA roots are embedded: the image has no /etc/ssl (an empty base).
	_ "golang.org/x/crypto/x509roots/fallback"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	v1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/internal/appoptions"
	"github.com/b10x/connector-mcp/internal/gatewayapp"
	"github.com/b10x/connector-mcp/internal/tracing"
)

func main() {
	os.Exit(run())
}

// serveRunnable runs the MCP listener on every replica (no leader election).
type serveRunnable struct {
	w    *gatewayapp.Wired
	addr string
}

func (s serveRunnable) Start(ctx context.Context) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", s.addr)
	if err != nil {
		return err
	}
	ctrl.Log.WithName("setup").Info("Listening for MCP", "address", ln.Addr().String())
	return s.w.Serve(ctx, ln)
}

func (serveRunnable) NeedLeaderElection() bool { return false }

var _ manager.LeaderElectionRunnable = serveRunnable{}

func run() int {
	opts := gatewayapp.DefaultOptions()
	fs := pflag.CommandLine
	opts.BindFlags(fs)
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	fs.AddGoFlagSet(flag.CommandLine)
	pflag.Parse()
	opts.ApplyEnvDefaults(fs, os.Getenv) // --verified-pack-namespace defaults to $POD_NAMESPACE
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	log := ctrl.Log.WithName("setup")
	if err := opts.Validate(); err != nil { // the gateway's one validation (Setup requires it)
		log.Error(err, "Invalid flags")
		return 2
	}

	// Traces (docs/observability.md): off unless OTEL_EXPORTER_OTLP_ENDPOINT is set.
	stopTracing, err := tracing.StartForBinary("connector-mcp-gateway", log)
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
		Scheme:                 scheme,
		Metrics:                opts.Metrics.ServerOptions(),
		HealthProbeBindAddress: opts.HealthProbeBindAddress,
		// Secrets are never cached: the resolver and the connector read them by name, uncached,
		// where a namespace consented (docs/security.md).
		Cache:                   cache.Options{ByObject: appoptions.CacheByObject()},
		GracefulShutdownTimeout: func() *time.Duration { d := opts.DrainTimeout + 5*time.Second; return &d }(),
	})
	if err != nil {
		log.Error(err, "Unable to create the manager")
		return 1
	}
	w, err := gatewayapp.Setup(mgr, opts, ctrl.Log, true)
	if err != nil {
		log.Error(err, "Unable to set up the gateway")
		return 1
	}
	defer func() { _ = w.Audit.Close() }()
	if err := mgr.Add(serveRunnable{w: w, addr: opts.ListenAddress}); err != nil {
		log.Error(err, "Unable to add the listener")
		return 1
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		log.Error(err, "Unable to add the health check")
		return 1
	}
	if err := mgr.AddReadyzCheck("readyz", w.Ready); err != nil {
		log.Error(err, "Unable to add the readiness check")
		return 1
	}
	log.Info("Starting the gateway", "listenAddress", opts.ListenAddress, "audience", opts.Audience, "plainHTTPUnsafe", opts.PlainHTTPUnsafe,
		"skipProvenanceUnsafe", opts.SkipProvenanceUnsafe, "keylessTrustedRoot", opts.KeylessTrust().String())
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "The gateway stopped with an error")
		return 1
	}
	return 0
}
