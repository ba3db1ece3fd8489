// cert-manager's CA injector for moco-rs's tests: cert-manager's injectors
// (pkg/controller/cainjector) in a controller-runtime manager, configured as the image
// quay.io/jetstack/cert-manager-cainjector configures them (its CAInjectorConfiguration with
// cert-manager's defaults, leader election on a Lease). Built by scripts/kube/build.sh.
//
// The flags are those of cert-manager's cainjector that a deployment sets (the Helm chart's
// --v and --leader-election-namespace among them); the others (profiling, metrics TLS) are
// refused as unknown rather than ignored.
package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	apiext "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	kscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	cliflag "k8s.io/component-base/cli/flag"
	apireg "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	config "github.com/cert-manager/cert-manager/internal/apis/config/cainjector"
	configscheme "github.com/cert-manager/cert-manager/internal/apis/config/cainjector/scheme"
	"github.com/cert-manager/cert-manager/internal/apis/config/cainjector/validation"
	configv1alpha1 "github.com/cert-manager/cert-manager/pkg/apis/config/cainjector/v1alpha1"
	cainjectorconfigfile "github.com/cert-manager/cert-manager/pkg/cainjector/configfile"
	cmscheme "github.com/cert-manager/cert-manager/pkg/client/clientset/versioned/scheme"
	"github.com/cert-manager/cert-manager/pkg/controller/cainjector"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	"github.com/cert-manager/cert-manager/pkg/util"
	"github.com/cert-manager/cert-manager/pkg/util/configfile"
	utilfeature "github.com/cert-manager/cert-manager/pkg/util/feature"

	"github.com/cert-manager/cert-manager/moco-rs-wrapper/cli"
)

// defaults: cert-manager's CAInjectorConfiguration with its defaulting functions applied.
func defaults() (*config.CAInjectorConfiguration, error) {
	scheme, _, err := configscheme.NewSchemeAndCodecs()
	if err != nil {
		return nil, err
	}
	versioned := &configv1alpha1.CAInjectorConfiguration{}
	scheme.Default(versioned)
	cfg := &config.CAInjectorConfiguration{}
	return cfg, scheme.Convert(versioned, cfg, nil)
}

func bind(fs *pflag.FlagSet, c *config.CAInjectorConfiguration) {
	fs.StringVar(&c.KubeConfig, "kubeconfig", c.KubeConfig, "a kubeconfig (in the cluster: none)")
	fs.StringVar(&c.Namespace, "namespace", c.Namespace, "inject only into resources of this namespace")
	fs.StringSliceVar(&c.IgnoreNamespaces, "ignore-namespaces", c.IgnoreNamespaces, "namespaces whose Secrets are not read")
	le := &c.LeaderElectionConfig
	fs.BoolVar(&le.Enabled, "leader-elect", le.Enabled, "elect a leader among the replicas")
	fs.StringVar(&le.Namespace, "leader-election-namespace", le.Namespace, "the namespace of the leader election Lease")
	fs.DurationVar(&le.LeaseDuration, "leader-election-lease-duration", le.LeaseDuration, "leader election lease duration")
	fs.DurationVar(&le.RenewDeadline, "leader-election-renew-deadline", le.RenewDeadline, "leader election renew deadline")
	fs.DurationVar(&le.RetryPeriod, "leader-election-retry-period", le.RetryPeriod, "leader election retry period")
	fs.BoolVar(&c.EnableDataSourceConfig.Certificates, "enable-certificates-data-source", c.EnableDataSourceConfig.Certificates, "inject from Certificates (cert-manager.io/inject-ca-from)")
	in := &c.EnableInjectableConfig
	fs.BoolVar(&in.ValidatingWebhookConfigurations, "enable-validatingwebhookconfigurations-injectable", in.ValidatingWebhookConfigurations, "inject into ValidatingWebhookConfigurations")
	fs.BoolVar(&in.MutatingWebhookConfigurations, "enable-mutatingwebhookconfigurations-injectable", in.MutatingWebhookConfigurations, "inject into MutatingWebhookConfigurations")
	fs.BoolVar(&in.CustomResourceDefinitions, "enable-customresourcedefinitions-injectable", in.CustomResourceDefinitions, "inject into CustomResourceDefinitions")
	fs.BoolVar(&in.APIServices, "enable-apiservices-injectable", in.APIServices, "inject into APIServices")
	fs.StringVar(&c.MetricsListenAddress, "metrics-listen-address", c.MetricsListenAddress, "the metrics endpoint's address ('0': none)")
	fs.Var(cliflag.NewMapStringBool(&c.FeatureGates), "feature-gates", "cert-manager feature gates, key=value pairs")
	logf.AddFlags(&c.Logging, fs)
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		return clientcmd.BuildConfigFromFlags("", kubeconfig)
	}
	return rest.InClusterConfig()
}

func run(ctx context.Context, opts *config.CAInjectorConfiguration) error {
	log := logf.FromContext(ctx)
	base, err := restConfig(opts.KubeConfig)
	if err != nil {
		return fmt.Errorf("kubernetes client configuration: %w", err)
	}
	restCfg := util.RestConfigWithUserAgent(base, "cainjector")

	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{kscheme.AddToScheme, cmscheme.AddToScheme, apiext.AddToScheme, apireg.AddToScheme} {
		if err := add(scheme); err != nil {
			return err
		}
	}
	var namespaces map[string]cache.Config
	if opts.Namespace != "" {
		namespaces = map[string]cache.Config{opts.Namespace: {}}
	}
	le := opts.LeaderElectionConfig
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme: scheme,
		Cache:  cache.Options{ReaderFailOnMissingInformer: true, DefaultNamespaces: namespaces},
		// As cert-manager's: Secrets are read from the API server, never cached.
		Client:                        client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
		LeaderElection:                le.Enabled,
		LeaderElectionNamespace:       le.Namespace,
		LeaderElectionID:              "cert-manager-cainjector-leader-election",
		LeaderElectionReleaseOnCancel: true,
		LeaderElectionLabels:          map[string]string{"app.kubernetes.io/managed-by": "cert-manager-cainjector"},
		LeaderElectionResourceLock:    resourcelock.LeasesResourceLock,
		LeaseDuration:                 &le.LeaseDuration,
		RenewDeadline:                 &le.RenewDeadline,
		RetryPeriod:                   &le.RetryPeriod,
		Metrics:                       metricsserver.Options{BindAddress: opts.MetricsListenAddress},
	})
	if err != nil {
		return fmt.Errorf("controller manager: %w", err)
	}

	if opts.EnableDataSourceConfig.Certificates {
		// The Certificate data source needs cert-manager's CRDs: wait for them (5 min at most).
		direct, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
		if err != nil {
			return err
		}
		err = wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
			err := direct.Get(ctx, types.NamespacedName{Name: "certificates.cert-manager.io"}, &apiext.CustomResourceDefinition{})
			if apierrors.IsNotFound(err) {
				log.Info("waiting for the CRD certificates.cert-manager.io")
				return false, nil
			}
			return err == nil, err
		})
		if err != nil {
			return fmt.Errorf("the CRD certificates.cert-manager.io: %w", err)
		}
	}

	in := opts.EnableInjectableConfig
	if err := cainjector.RegisterAllInjectors(ctx, mgr, cainjector.SetupOptions{
		Namespace:                    opts.Namespace,
		IgnoreNamespaces:             opts.IgnoreNamespaces,
		EnableCertificatesDataSource: opts.EnableDataSourceConfig.Certificates,
		EnabledReconcilersFor: map[string]bool{
			cainjector.MutatingWebhookConfigurationName:   in.MutatingWebhookConfigurations,
			cainjector.ValidatingWebhookConfigurationName: in.ValidatingWebhookConfigurations,
			cainjector.APIServiceName:                     in.APIServices,
			cainjector.CustomResourceDefinitionName:       in.CustomResourceDefinitions,
		},
	}); err != nil {
		return fmt.Errorf("registering the injectors: %w", err)
	}
	return mgr.Start(ctx)
}

func main() {
	cfg, err := defaults()
	if err != nil {
		panic(err)
	}
	cli.Main(cli.Command{
		Name: "cainjector",
		Bind: func(fs *pflag.FlagSet) { bind(fs, cfg) },
		Load: func(load func(configfile.ConfigFile) error) error {
			f := cainjectorconfigfile.New()
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
			if errs := validation.ValidateCAInjectorConfiguration(cfg, nil); len(errs) > 0 {
				return errs.ToAggregate()
			}
			return logf.ValidateAndApply(&cfg.Logging)
		},
		Run: func(ctx context.Context) error { return run(ctx, cfg) },
	})
}
