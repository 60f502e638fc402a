"""Models of rayscale's custom resources and CRD generation from them."""
