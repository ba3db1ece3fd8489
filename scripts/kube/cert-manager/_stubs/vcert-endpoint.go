// Package endpoint stands in for github.com/Venafi/vcert/v5/pkg/endpoint, which the Go module
// proxy of this machine refuses (see venafi-client.go): it holds only the two error types that
// cert-manager's Venafi CertificateRequest and CertificateSigningRequest controllers name in
// their type switches. The stand-in Venafi client never returns them. scripts/kube/build.sh
// makes it a module github.com/Venafi/vcert/v5 of its own and points the wrapper at it.
package endpoint

import "fmt"

// ErrCertificatePending: the certificate is not issued yet.
type ErrCertificatePending struct {
	CertificateID string
	Status        string
}

func (e ErrCertificatePending) Error() string {
	return fmt.Sprintf("certificate %s is pending: %s", e.CertificateID, e.Status)
}

// ErrRetrieveCertificateTimeout: retrieving the certificate timed out.
type ErrRetrieveCertificateTimeout struct {
	CertificateID string
}

func (e ErrRetrieveCertificateTimeout) Error() string {
	return fmt.Sprintf("timed out retrieving certificate %s", e.CertificateID)
}
