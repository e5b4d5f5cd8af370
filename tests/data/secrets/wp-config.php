<?php
define( 'DB_NAME', 'wordpress' );
define( 'DB_USER', 'wp_user' );
define( 'DB_PASSWORD', 'EK3dwF6lYncagB' );
define( 'DB_HOST', 'localhost' );
define( 'AUTH_KEY',         'PBUYRDl3hEJSk9D6gMjg9mfvyegvOAEyjKfINhw8K65YP9IB8N7tEdHR3VfScOfM' );
define( 'LOGGED_IN_KEY',    'F6zReYmQsaJIL55v9Cxvn0yPkpjqPF3bdV1vKuDpUttM7tlP65TFloHdnvBcc4IQ' );
define( 'NONCE_SALT',       'giRKwvBCBuBt5SGv2drxCUS3sQTQSrlTjf4CoAKXd6stAEXskLkG8l9Gbjzd01X3' );
$table_prefix = 'wp_';
define( 'WP_DEBUG', false );
