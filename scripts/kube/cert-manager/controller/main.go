// cert-manager's controller for moco-rs's tests: cert-manager's controllers (every one
// registered in pkg/controller, enabled by the same --controllers rules and defaults) and its
// issuers (ACME, CA, self-signed, Vault, Venafi), run as the image
// quay.io/jetstack/cert-manager-controller runs them: its ControllerConfiguration with
// cert-manager's defaults, one leader among the replicas (a Lease), the metrics and
// /livez servers. Built by scripts/kube/build.sh.
//
// The flags are those of cert-manager's controller that a deployment sets (the Helm chart's
// --v, --cluster-resource-namespace, --leader-election-namespace, --acme-http01-solver-image
// and --max-concurrent-challenges among them); the others (profiling, metrics TLS, the
// Gateway API) are refused as unknown rather than ignored.
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	cliflag "k8s.io/component-base/cli/flag"

	config "github.com/cert-manager/cert-manager/internal/apis/config/controller"
	configscheme "github.com/cert-manager/cert-manager/internal/apis/config/controller/scheme"
	defaults "github.com/cert-manager/cert-manager/internal/apis/config/controller/v1alpha1"
	"github.com/cert-manager/cert-manager/internal/apis/config/controller/validation"
	"github.com/cert-manager/cert-manager/internal/controller/feature"
	"github.com/cert-manager/cert-manager/internal/pem"
	configv1alpha1 "github.com/cert-manager/cert-manager/pkg/apis/config/controller/v1alpha1"
	"github.com/cert-manager/cert-manager/pkg/controller"
	"github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	controllerconfigfile "github.com/cert-manager/cert-manager/pkg/controller/configfile"
	"github.com/cert-manager/cert-manager/pkg/healthz"
	dnsutil "github.com/cert-manager/cert-manager/pkg/issuer/acme/dns/util"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	"github.com/cert-manager/cert-manager/pkg/util/configfile"
	utilfeature "github.com/cert-manager/cert-manager/pkg/util/feature"

	// The issuers (each registers itself); the controllers register themselves when the
	// defaults package above imports them for their names.
	_ "github.com/cert-manager/cert-manager/pkg/issuer/acme"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/vault"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/venafi"

	"github.com/cert-manager/cert-manager/moco-rs-wrapper/cli"
)

func newConfig() (*config.ControllerConfiguration, error) {
	scheme, _, err := configscheme.NewSchemeAndCodecs()
	if err != nil {
		return nil, err
	}
	versioned := &configv1alpha1.ControllerConfiguration{}
	scheme.Default(versioned)
	cfg := &config.ControllerConfiguration{}
	return cfg, scheme.Convert(versioned, cfg, nil)
}

func bind(fs *pflag.FlagSet, c *config.ControllerConfiguration) {
	fs.StringVar(&c.APIServerHost, "master", c.APIServerHost, "the API server's address (in the cluster: none)")
	fs.StringVar(&c.KubeConfig, "kubeconfig", c.KubeConfig, "a kubeconfig (in the cluster: none)")
	fs.Float32Var(&c.KubernetesAPIQPS, "kube-api-qps", c.KubernetesAPIQPS, "API requests per second")
	fs.IntVar(&c.KubernetesAPIBurst, "kube-api-burst", c.KubernetesAPIBurst, "API request burst")
	fs.StringVar(&c.Namespace, "namespace", c.Namespace, "watch only this namespace (ClusterIssuers off)")
	fs.StringVar(&c.ClusterResourceNamespace, "cluster-resource-namespace", c.ClusterResourceNamespace, "where the Secrets of ClusterIssuers are")
	le := &c.LeaderElectionConfig
	fs.BoolVar(&le.Enabled, "leader-elect", le.Enabled, "elect a leader among the replicas")
	fs.StringVar(&le.Namespace, "leader-election-namespace", le.Namespace, "the namespace of the leader election Lease")
	fs.DurationVar(&le.LeaseDuration, "leader-election-lease-duration", le.LeaseDuration, "leader election lease duration")
	fs.DurationVar(&le.RenewDeadline, "leader-election-renew-deadline", le.RenewDeadline, "leader election renew deadline")
	fs.DurationVar(&le.RetryPeriod, "leader-election-retry-period", le.RetryPeriod, "leader election retry period")
	fs.StringSliceVar(&c.Controllers, "controllers", c.Controllers, "controllers to run: '*' (the default ones), 'name', '-name'; all: "+strings.Join(defaults.AllControllers, ", "))
	a := &c.ACMEHTTP01Config
	fs.StringVar(&a.SolverImage, "acme-http01-solver-image", a.SolverImage, "the ACME HTTP-01 solver image")
	fs.StringVar(&a.SolverResourceRequestCPU, "acme-http01-solver-resource-request-cpu", a.SolverResourceRequestCPU, "the solver Pods' CPU request")
	fs.StringVar(&a.SolverResourceRequestMemory, "acme-http01-solver-resource-request-memory", a.SolverResourceRequestMemory, "the solver Pods' memory request")
	fs.StringVar(&a.SolverResourceLimitsCPU, "acme-http01-solver-resource-limits-cpu", a.SolverResourceLimitsCPU, "the solver Pods' CPU limit")
	fs.StringVar(&a.SolverResourceLimitsMemory, "acme-http01-solver-resource-limits-memory", a.SolverResourceLimitsMemory, "the solver Pods' memory limit")
	fs.BoolVar(&a.SolverRunAsNonRoot, "acme-http01-solver-run-as-non-root", a.SolverRunAsNonRoot, "run the solver Pods as non-root")
	fs.StringSliceVar(&c.ACMEDNS01Config.RecursiveNameservers, "dns01-recursive-nameservers", c.ACMEDNS01Config.RecursiveNameservers, "DNS-01 self-check resolvers")
	fs.BoolVar(&c.ACMEDNS01Config.RecursiveNameserversOnly, "dns01-recursive-nameservers-only", c.ACMEDNS01Config.RecursiveNameserversOnly, "query only those resolvers")
	fs.DurationVar(&c.ACMEDNS01Config.CheckRetryPeriod, "dns01-check-retry-period", c.ACMEDNS01Config.CheckRetryPeriod, "between propagation checks")
	fs.BoolVar(&c.ClusterIssuerAmbientCredentials, "cluster-issuer-ambient-credentials", c.ClusterIssuerAmbientCredentials, "ClusterIssuers may use ambient credentials")
	fs.BoolVar(&c.IssuerAmbientCredentials, "issuer-ambient-credentials", c.IssuerAmbientCredentials, "Issuers may use ambient credentials")
	is := &c.IngressShimConfig
	fs.StringSliceVar(&is.DefaultAutoCertificateAnnotations, "auto-certificate-annotations", is.DefaultAutoCertificateAnnotations, "ingress-shim annotations")
	fs.StringVar(&is.DefaultIssuerName, "default-issuer-name", is.DefaultIssuerName, "ingress-shim default issuer name")
	fs.StringVar(&is.DefaultIssuerKind, "default-issuer-kind", is.DefaultIssuerKind, "ingress-shim default issuer kind")
	fs.StringVar(&is.DefaultIssuerGroup, "default-issuer-group", is.DefaultIssuerGroup, "ingress-shim default issuer group")
	fs.BoolVar(&c.EnableCertificateOwnerRef, "enable-certificate-owner-ref", c.EnableCertificateOwnerRef, "make the Certificate own its Secret")
	fs.StringSliceVar(&c.CopiedAnnotationPrefixes, "copied-annotation-prefixes", c.CopiedAnnotationPrefixes, "annotations copied to CertificateRequests and Orders")
	fs.Var(cliflag.NewMapStringBool(&c.FeatureGates), "feature-gates", "cert-manager feature gates, key=value pairs")
	fs.IntVar(&c.NumberOfConcurrentWorkers, "concurrent-workers", c.NumberOfConcurrentWorkers, "workers per controller")
	fs.IntVar(&c.MaxConcurrentChallenges, "max-concurrent-challenges", c.MaxConcurrentChallenges, "ACME challenges processed at once")
	fs.StringVar(&c.MetricsListenAddress, "metrics-listen-address", c.MetricsListenAddress, "the metrics endpoint's address")
	fs.StringVar(&c.HealthzListenAddress, "internal-healthz-listen-address", c.HealthzListenAddress, "the /livez endpoint's address")
	fs.DurationVar(&c.CertificateRequestMinimumBackoffDuration, "certificate-request-minimum-backoff-duration", c.CertificateRequestMinimumBackoffDuration, "first back-off after a failed request")
	fs.DurationVar(&c.CertificateRequestMaximumBackoffDuration, "certificate-request-maximum-backoff-duration", c.CertificateRequestMaximumBackoffDuration, "longest back-off")
	logf.AddFlags(&c.Logging, fs)
}

// enabled: the controllers --controllers names ("*" the default set, "-x" removes x; only
// removals: the default set less those), the CSR ones when their feature gate is on, and no
// cluster-scoped one when the controller is confined to a namespace.
func enabled(c *config.ControllerConfiguration) sets.Set[string] {
	on, off := sets.New[string](), sets.New[string]()
	for _, name := range c.Controllers {
		switch {
		case name == "*":
			on.Insert(defaults.DefaultEnabledControllers...)
		case strings.HasPrefix(name, "-"):
			off.Insert(strings.TrimPrefix(name, "-"))
		default:
			on.Insert(name)
		}
	}
	if on.Len() == 0 && off.Len() > 0 {
		on.Insert(defaults.DefaultEnabledControllers...)
	}
	if utilfeature.DefaultFeatureGate.Enabled(feature.ExperimentalCertificateSigningRequestControllers) {
		on.Insert(defaults.ExperimentalCertificateSigningRequestControllers...)
	}
	if c.Namespace != "" {
		on.Delete(defaults.ClusterScopedControllers...)
	}
	return on.Difference(off)
}

func contextFactory(ctx context.Context, c *config.ControllerConfiguration) (*controller.ContextFactory, error) {
	quantity := map[string]resource.Quantity{}
	for name, s := range map[string]string{
		"request-cpu": c.ACMEHTTP01Config.SolverResourceRequestCPU, "request-memory": c.ACMEHTTP01Config.SolverResourceRequestMemory,
		"limits-cpu": c.ACMEHTTP01Config.SolverResourceLimitsCPU, "limits-memory": c.ACMEHTTP01Config.SolverResourceLimitsMemory,
	} {
		q, err := resource.ParseQuantity(s)
		if err != nil {
			return nil, fmt.Errorf("--acme-http01-solver-resource-%s: %w", name, err)
		}
		quantity[name] = q
	}
	nameservers := c.ACMEDNS01Config.RecursiveNameservers
	if len(nameservers) == 0 {
		nameservers = dnsutil.RecursiveNameservers
	}
	a := c.ACMEHTTP01Config
	return controller.NewContextFactory(ctx, controller.ContextOptions{
		Kubeconfig:         c.KubeConfig,
		KubernetesAPIQPS:   c.KubernetesAPIQPS,
		KubernetesAPIBurst: c.KubernetesAPIBurst,
		APIServerHost:      c.APIServerHost,
		Namespace:          c.Namespace,
		ACMEOptions: controller.ACMEOptions{
			HTTP01SolverImage:                 a.SolverImage,
			HTTP01SolverResourceRequestCPU:    quantity["request-cpu"],
			HTTP01SolverResourceRequestMemory: quantity["request-memory"],
			HTTP01SolverResourceLimitsCPU:     quantity["limits-cpu"],
			HTTP01SolverResourceLimitsMemory:  quantity["limits-memory"],
			ACMEHTTP01SolverRunAsNonRoot:      a.SolverRunAsNonRoot,
			HTTP01SolverRuntimeClassName:      a.SolverRuntimeClassName,
			HTTP01SolverNameservers:           a.SolverNameservers,
			HTTP01SolverExtraLabels:           a.SolverExtraLabels,
			DNS01Nameservers:                  nameservers,
			DNS01CheckRetryPeriod:             c.ACMEDNS01Config.CheckRetryPeriod,
			DNS01CheckAuthoritative:           !c.ACMEDNS01Config.RecursiveNameserversOnly,
		},
		SchedulerOptions: controller.SchedulerOptions{MaxConcurrentChallenges: c.MaxConcurrentChallenges},
		IssuerOptions: controller.IssuerOptions{
			ClusterIssuerAmbientCredentials: c.ClusterIssuerAmbientCredentials,
			IssuerAmbientCredentials:        c.IssuerAmbientCredentials,
			ClusterResourceNamespace:        c.ClusterResourceNamespace,
		},
		IngressShimOptions: controller.IngressShimOptions{
			DefaultIssuerName:                 c.IngressShimConfig.DefaultIssuerName,
			DefaultIssuerKind:                 c.IngressShimConfig.DefaultIssuerKind,
			DefaultIssuerGroup:                c.IngressShimConfig.DefaultIssuerGroup,
			DefaultAutoCertificateAnnotations: c.IngressShimConfig.DefaultAutoCertificateAnnotations,
			ExtraCertificateAnnotations:       c.IngressShimConfig.ExtraCertificateAnnotations,
			GatewayAPIExtraProtocols:          sets.New[string](),
		},
		CertificateOptions: controller.CertificateOptions{
			EnableOwnerRef:                           c.EnableCertificateOwnerRef,
			CopiedAnnotationPrefixes:                 c.CopiedAnnotationPrefixes,
			CertificateRequestMinimumBackoffDuration: c.CertificateRequestMinimumBackoffDuration,
			CertificateRequestMaximumBackoffDuration: c.CertificateRequestMaximumBackoffDuration,
		},
	})
}

// serve runs srv on ln until ctx ends.
func serve(ctx context.Context, g *errgroup.Group, srv *http.Server, ln net.Listener) {
	g.Go(func() error {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(shutdown)
	})
	g.Go(func() error {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
}

func run(ctx context.Context, c *config.ControllerConfiguration) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	log := logf.FromContext(ctx)
	g, ctx := errgroup.WithContext(ctx)

	factory, err := contextFactory(ctx, c)
	if err != nil {
		return err
	}
	cctx, err := factory.Build()
	if err != nil {
		return err
	}
	p := c.PEMSizeLimitsConfig
	pem.SetGlobalSizeLimits(pem.NewSizeLimitsFromConfig(p.MaxCertificateSize, p.MaxPrivateKeySize, p.MaxChainLength, p.MaxBundleSize))
	on := enabled(c)
	log.Info("enabled controllers", "controllers", sets.List(on))

	var lc net.ListenConfig
	metricsLn, err := lc.Listen(ctx, "tcp", c.MetricsListenAddress)
	if err != nil {
		return fmt.Errorf("metrics address %s: %w", c.MetricsListenAddress, err)
	}
	cm := cctx.SharedInformerFactory.Certmanager().V1()
	cctx.Metrics.SetupACMECollector(cctx.SharedInformerFactory.Acme().V1().Challenges().Lister())
	cctx.Metrics.SetupCertificateCollector(cm.Certificates().Lister())
	cctx.Metrics.SetupIssuerCollector(cm.Issuers().Lister())
	if on.Has(clusterissuers.ControllerName) {
		cctx.Metrics.SetupClusterIssuerCollector(cm.ClusterIssuers().Lister())
	}
	serve(ctx, g, cctx.Metrics.NewServer(metricsLn), metricsLn)

	healthzLn, err := lc.Listen(ctx, "tcp", c.HealthzListenAddress)
	if err != nil {
		return fmt.Errorf("healthz address %s: %w", c.HealthzListenAddress, err)
	}
	health := healthz.NewServer(c.LeaderElectionConfig.HealthzTimeout)
	g.Go(func() error { return health.Start(ctx, healthzLn) })

	elected := make(chan struct{})
	if c.LeaderElectionConfig.Enabled {
		g.Go(func() error { return lead(ctx, c, factory, health, elected) })
	} else {
		close(elected)
	}
	select {
	case <-ctx.Done():
		return g.Wait()
	case <-elected:
	}

	for name, construct := range controller.Known() {
		if !on.Has(name) {
			continue
		}
		ctl, err := construct(factory)
		if err != nil {
			cancel()
			return errors.Join(fmt.Errorf("controller %s: %w", name, err), g.Wait())
		}
		g.Go(func() error { return ctl.Run(c.NumberOfConcurrentWorkers, ctx) })
	}
	cctx.SharedInformerFactory.Start(ctx.Done())
	cctx.KubeSharedInformerFactory.Start(ctx.Done())
	cctx.HTTP01ResourceMetadataInformersFactory.Start(ctx.Done())
	err = g.Wait()
	cctx.HTTP01ResourceMetadataInformersFactory.Shutdown()
	cctx.KubeSharedInformerFactory.Shutdown()
	cctx.SharedInformerFactory.Shutdown()
	return err
}

// lead runs the leader election (a Lease cert-manager-controller in the configured namespace)
// and closes elected when this replica leads; losing the lead is an error (the process ends).
func lead(ctx context.Context, c *config.ControllerConfiguration, factory *controller.ContextFactory, health *healthz.Server, elected chan struct{}) error {
	lctx, err := factory.Build("leader-election")
	if err != nil {
		return err
	}
	host, err := os.Hostname()
	if err != nil {
		return err
	}
	lock, err := resourcelock.NewWithLabels(resourcelock.LeasesResourceLock, c.LeaderElectionConfig.Namespace,
		"cert-manager-controller", lctx.Client.CoreV1(), lctx.Client.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: host + "-external-cert-manager-controller", EventRecorder: lctx.Recorder},
		map[string]string{"app.kubernetes.io/managed-by": "cert-manager"})
	if err != nil {
		return fmt.Errorf("leader election lock: %w", err)
	}
	lost := make(chan struct{})
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   c.LeaderElectionConfig.LeaseDuration,
		RenewDeadline:   c.LeaderElectionConfig.RenewDeadline,
		RetryPeriod:     c.LeaderElectionConfig.RetryPeriod,
		ReleaseOnCancel: true,
		WatchDog:        health.LeaderHealthzAdaptor,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { close(elected) },
			OnStoppedLeading: func() { close(lost) },
		},
	})
	if err != nil {
		return err
	}
	le.Run(ctx)
	select {
	case <-ctx.Done():
		return nil
	case <-lost:
		return errors.New("leader election lost")
	}
}

func main() {
	cfg, err := newConfig()
	if err != nil {
		panic(err)
	}
	cli.Main(cli.Command{
		Name: "controller",
		Bind: func(fs *pflag.FlagSet) { bind(fs, cfg) },
		Load: func(load func(configfile.ConfigFile) error) error {
			f := controllerconfigfile.New()
			if err := load(f); err != nil {
				return err
			}
			f.Config.DeepCopyInto(cfg)
			return nil
		},
		Check: func() error {
			if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(cfg.FeatureGates); err != nil {
				return fmt.Errorf("feature gates: %w", err)
			}
			if errs := validation.ValidateControllerConfiguration(cfg, nil); len(errs) > 0 {
				return errs.ToAggregate()
			}
			if cfg.GatewayAPIConfig.Enabled || cfg.EnablePprof || cfg.MetricsTLSConfig.FilesystemConfigProvided() || cfg.MetricsTLSConfig.DynamicConfigProvided() {
				return errors.New("the Gateway API, profiling and metrics TLS are not supported by this build (scripts/kube/cert-manager)")
			}
			return logf.ValidateAndApply(&cfg.Logging)
		},
		Run: func(ctx context.Context) error { return run(ctx, cfg) },
	})
}
