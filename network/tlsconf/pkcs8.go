package tlsconf

import (
	"crypto"
	"crypto/aes"
	"crypto/cipher"
	"crypto/des"
	"crypto/pbkdf2"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"fmt"
	"hash"
)

// Object identifiers of PKCS#5 v2 (RFC 8018) encryption.
var (
	oidPBES2        = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 13}
	oidPBKDF2       = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 12}
	oidHMACSHA1     = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 7}
	oidHMACSHA224   = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 8}
	oidHMACSHA256   = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 9}
	oidHMACSHA384   = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 10}
	oidHMACSHA512   = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 11}
	oidAES128CBC    = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 2}
	oidAES192CBC    = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 22}
	oidAES256CBC    = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 42}
	oidDESEDE3CBC   = asn1.ObjectIdentifier{1, 2, 840, 113549, 3, 7}
	maxPBKDF2Rounds = 10_000_000 // OpenSSL uses 2048, Java 10000: more is a corrupt or hostile file
)

// encryptedPrivateKeyInfo is PKCS#8's EncryptedPrivateKeyInfo.
type encryptedPrivateKeyInfo struct {
	Algorithm     pkix.AlgorithmIdentifier
	EncryptedData []byte
}

// pbes2Params are PBES2-params.
type pbes2Params struct {
	KeyDerivationFunc pkix.AlgorithmIdentifier
	EncryptionScheme  pkix.AlgorithmIdentifier
}

// pbkdf2Params are PBKDF2-params (the salt of the "specified" choice).
type pbkdf2Params struct {
	Salt           []byte
	IterationCount int
	KeyLength      int                      `asn1:"optional"`
	PRF            pkix.AlgorithmIdentifier `asn1:"optional"`
}

// decryptPKCS8 decrypts an ENCRYPTED PRIVATE KEY: PKCS#8 encrypted with
// PBES2 (PBKDF2 with HMAC-SHA-1/224/256/384/512, AES-CBC or 3DES-CBC), what
// OpenSSL's pkcs8 -topk8 and Java write. Legacy PBES1 keys are refused.
func decryptPKCS8(der []byte, password string) (crypto.PrivateKey, error) {
	var info encryptedPrivateKeyInfo
	if rest, err := asn1.Unmarshal(der, &info); err != nil || len(rest) > 0 {
		return nil, errors.New("not a PKCS#8 EncryptedPrivateKeyInfo")
	}
	if !info.Algorithm.Algorithm.Equal(oidPBES2) {
		return nil, fmt.Errorf("encryption %s is not supported: re-encrypt the key with PBES2 "+
			"(openssl pkcs8 -topk8 -v2 aes-256-cbc), or use an unencrypted PKCS#8 key or a PKCS12 keystore", info.Algorithm.Algorithm)
	}
	var params pbes2Params
	if _, err := asn1.Unmarshal(info.Algorithm.Parameters.FullBytes, &params); err != nil {
		return nil, fmt.Errorf("bad PBES2 parameters: %w", err)
	}
	if !params.KeyDerivationFunc.Algorithm.Equal(oidPBKDF2) {
		return nil, fmt.Errorf("key derivation %s is not supported (PBKDF2 is): use an unencrypted PKCS#8 key or a PKCS12 keystore",
			params.KeyDerivationFunc.Algorithm)
	}
	var kdf pbkdf2Params
	if _, err := asn1.Unmarshal(params.KeyDerivationFunc.Parameters.FullBytes, &kdf); err != nil {
		return nil, fmt.Errorf("bad PBKDF2 parameters: %w", err)
	}
	if kdf.IterationCount < 1 || kdf.IterationCount > maxPBKDF2Rounds {
		return nil, fmt.Errorf("bad PBKDF2 iteration count %d", kdf.IterationCount)
	}
	var prf func() hash.Hash
	switch alg := kdf.PRF.Algorithm; {
	case len(alg) == 0, alg.Equal(oidHMACSHA1):
		prf = sha1.New
	case alg.Equal(oidHMACSHA224):
		prf = sha256.New224
	case alg.Equal(oidHMACSHA256):
		prf = sha256.New
	case alg.Equal(oidHMACSHA384):
		prf = sha512.New384
	case alg.Equal(oidHMACSHA512):
		prf = sha512.New
	default:
		return nil, fmt.Errorf("PBKDF2 PRF %s is not supported", alg)
	}
	var newBlock func([]byte) (cipher.Block, error)
	var keyLen int
	switch alg := params.EncryptionScheme.Algorithm; {
	case alg.Equal(oidAES128CBC):
		newBlock, keyLen = aes.NewCipher, 16
	case alg.Equal(oidAES192CBC):
		newBlock, keyLen = aes.NewCipher, 24
	case alg.Equal(oidAES256CBC):
		newBlock, keyLen = aes.NewCipher, 32
	case alg.Equal(oidDESEDE3CBC):
		newBlock, keyLen = des.NewTripleDESCipher, 24
	default:
		return nil, fmt.Errorf("cipher %s is not supported (AES-CBC and 3DES-CBC are)", alg)
	}
	if kdf.KeyLength != 0 && kdf.KeyLength != keyLen {
		return nil, fmt.Errorf("PBKDF2 key length %d does not fit the cipher", kdf.KeyLength)
	}
	var iv []byte
	if _, err := asn1.Unmarshal(params.EncryptionScheme.Parameters.FullBytes, &iv); err != nil {
		return nil, fmt.Errorf("bad cipher parameters: %w", err)
	}
	key, err := pbkdf2.Key(prf, password, kdf.Salt, kdf.IterationCount, keyLen)
	if err != nil {
		return nil, err
	}
	block, err := newBlock(key)
	if err != nil {
		return nil, err
	}
	bs := block.BlockSize()
	ct := info.EncryptedData
	if len(iv) != bs || len(ct) == 0 || len(ct)%bs != 0 {
		return nil, errors.New("corrupt encrypted key")
	}
	plain := make([]byte, len(ct))
	cipher.NewCBCDecrypter(block, iv).CryptBlocks(plain, ct)
	wrong := fmt.Errorf("wrong %s", keyPasswordKey)
	pad := int(plain[len(plain)-1])
	if pad < 1 || pad > bs {
		return nil, wrong
	}
	for _, b := range plain[len(plain)-pad:] {
		if int(b) != pad {
			return nil, wrong
		}
	}
	plain = plain[:len(plain)-pad]
	k, err := x509.ParsePKCS8PrivateKey(plain)
	if err != nil {
		var pk struct {
			Version   int
			Algorithm pkix.AlgorithmIdentifier
			Key       []byte
		}
		if rest, err2 := asn1.Unmarshal(plain, &pk); err2 == nil && len(rest) == 0 {
			return nil, fmt.Errorf("unsupported private key (Go's TLS takes RSA, EC and Ed25519 keys): %w", err)
		}
		return nil, wrong
	}
	return k, nil
}
