// Package client stands in for cert-manager's pkg/issuer/venafi/client, whose files import
// github.com/Venafi/vcert/v5 v5.13.x: the Go module proxy of this machine refuses that
// module's zip (every v5.13.x: "This module version is not available"), and older releases lack
// the pkg/venafi/ngts package cert-manager v1.21 uses. scripts/kube/build.sh puts this file in
// place of the package's files in its copy of the cert-manager module. It keeps the names the rest of
// cert-manager uses (the Venafi issuer and the Venafi CertificateRequest and
// CertificateSigningRequest controllers) and refuses every Venafi issuer at set-up, so that the
// Issuer reports the reason in its Ready condition. Nothing else in cert-manager changes.
package client

import (
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"

	internalinformers "github.com/cert-manager/cert-manager/internal/informers"
	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	"github.com/cert-manager/cert-manager/pkg/issuer/venafi/client/api"
	"github.com/cert-manager/cert-manager/pkg/metrics"
)

// AuthFailedError is cert-manager's: the Venafi endpoint refused the credentials.
type AuthFailedError struct {
	Err error
}

func (e AuthFailedError) Error() string { return "OAuth token request failed: " + e.Err.Error() }

func (e AuthFailedError) Unwrap() error { return e.Err }

// VenafiClientBuilder is cert-manager's constructor type.
type VenafiClientBuilder func(namespace string, secretsLister internalinformers.SecretLister,
	issuer cmapi.GenericIssuer, metrics *metrics.Metrics, logger logr.Logger, userAgent string) (Interface, error)

// Interface is the part of cert-manager's Venafi client the rest of cert-manager calls.
type Interface interface {
	RequestCertificate(csrPEM []byte, duration time.Duration, customFields []api.CustomField) (string, error)
	RetrieveCertificate(pickupID string, csrPEM []byte, duration time.Duration, customFields []api.CustomField) ([]byte, error)
	Ping() error
	VerifyCredentials() error
}

// ErrCustomFieldsType is cert-manager's error for a bad custom field type.
type ErrCustomFieldsType struct { //nolint:errname
	Type api.CustomFieldType
}

func (err ErrCustomFieldsType) Error() string {
	return fmt.Sprintf("certificate request contains an invalid custom fields type: %q", err.Type)
}

// ErrorMissingSubject is cert-manager's.
var ErrorMissingSubject = errors.New("Certificate requests submitted to Venafi issuers must have the 'commonName' field or at least one other subject field set.") //nolint:errname

// New refuses: there is no Venafi client in this build.
func New(string, internalinformers.SecretLister, cmapi.GenericIssuer, *metrics.Metrics, logr.Logger, string) (Interface, error) {
	return nil, errors.New("the Venafi issuer is not in this build of cert-manager (moco-rs's scripts/kube/build.sh: the Go module proxy refuses github.com/Venafi/vcert/v5 v5.13.x)")
}
