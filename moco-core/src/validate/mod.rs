//! Spec validation rules shared by the admission webhook, `moco validate` and the CRD.
